"""A sentence as the reader gives it: its text and where it came from.

Apart from the reader so that a query, whose hits are sentences, never imports what reads a
corpus (the splitter, the record and WikiExtractor readers).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The fields of `Sentence` that only WikiExtractor input fills (None for other text).
ARTICLE_FIELDS = ("title", "url", "doc_id", "section")
#: A sentence's fields in `Sentence`'s order, as a tuple: what a build reads, millions of them
#: (making a frozen dataclass of nine fields took ~1 µs, a second of a 1M build's one-core
#: read stage).
SentenceRow = tuple[str, str, int, int, int, str | None, str | None, str | None, str | None]


@dataclass(frozen=True)
class Sentence:
    """One sentence and where it came from (line is 1-based; doc counts across the corpus);
    WikiExtractor input adds the article's title, url and id and the sentence's section."""

    text: str
    source: str
    line: int
    doc: int
    position: int
    title: str | None = None
    url: str | None = None
    doc_id: str | None = None
    section: str | None = None
