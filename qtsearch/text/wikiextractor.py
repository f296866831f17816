"""WikiExtractor output (Wikipedia dumps) as documents of sentences with article metadata.

The layout (attardi/wikiextractor, the 2015 text output of `../shared/data/wikipedia`):

    <doc id="12" url="http://en.wikipedia.org/wiki?curid=12" title="Anarchism">
    Anarchism                                  <- the title again
                                               <- a blank line
    Anarchism is a political philosophy …      <- one paragraph a line
    History.                                   <- a section heading: the title plus "."
    Origins.                                   <- a subsection, printed just before its text
    The earliest anarchist themes …
    </doc>

Each article is one document (so no context window crosses two articles); its id, url and
title travel with every sentence. Each paragraph line is split into sentences on its own (a
sentence never spans two paragraphs). WikiExtractor marks a heading only by the "." it appends,
so headings are recognised by shape: one short clause (at most HEADING_WORDS words) ending in
"." with no sentence break inside, no lower-case or pronoun start and none of the auxiliary
verbs that almost every short sentence has. A heading is not indexed; it becomes the `section`
of the sentences under it. WikiExtractor prints headings only right before text, so headings
still pending when an article ends were sentences after all and are indexed as such.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from qtsearch.text.splitter import split_text

#: A `<doc …>` line: its attributes (id, url, title; quotes in a title come HTML-escaped).
DOC_TAG = re.compile(r'^<doc(?:\s+\w+="[^"]*")+\s*>$')
_ATTR = re.compile(r'(\w+)="([^"]*)"')
#: Longest heading in words (longer one-clause lines are taken for sentences).
HEADING_WORDS = 10
#: Words that mark a clause as a sentence rather than a heading ("Cameroon's Air Force has 9
#: combat-capable aircraft.", "Let X be a space."); headings rarely hold one.
_VERBS = frozenset(["is", "was", "are", "were", "has", "have", "had", "be", "been", "being",
                    "will", "would", "can", "could", "shall", "should", "may", "might", "must",
                    "do", "does", "did"])
#: First words of sentences that never start a heading in the shared shards.
_PRONOUNS = frozenset(["he", "she", "it", "they", "we", "i", "this", "these", "those", "there"])
_INNER_END = re.compile(r"""[.!?]["')\]”’]*\s""")
_EDGE = "\"'()[]“”‘’,;:"


@dataclass(frozen=True)
class Article:
    """The metadata of one article, from its `<doc …>` line."""

    doc_id: str | None
    url: str | None
    title: str | None


def doc_tag(line: str) -> Article | None:
    """The article a `<doc id=… url=… title=…>` line opens, or None for any other line."""
    if not DOC_TAG.match(line):
        return None
    attrs = {k: html.unescape(v) for k, v in _ATTR.findall(line)}
    return Article(attrs.get("id"), attrs.get("url"), attrs.get("title"))


def is_heading(line: str) -> bool:
    """Whether a paragraph line is a section heading (see the module docstring)."""
    if not line.endswith(".") or line.endswith(".."):
        return False
    words = line[:-1].split()
    if not words or len(words) > HEADING_WORDS:
        return False
    if not (line[0].isupper() or line[0].isdigit() or line[0] in _EDGE):
        return False
    if _INNER_END.search(line[:-1]) or words[0].lower() in _PRONOUNS:
        return False
    return not any(w.strip(_EDGE).lower() in _VERBS for w in words)


#: What `wiki_sentences` yields: (starts a document?, line, sentence, article, section).
WikiSentence = tuple[int, int, str, Article, str]


def wiki_sentences(lines: Iterable[tuple[int, str]], clip: Callable[[int, str], str]
                   ) -> Iterator[WikiSentence]:
    """The sentences of WikiExtractor lines ((number, text) pairs) with their article and
    section ("" before the first heading); `clip` shortens an over-long sentence."""
    article: Article | None = None
    title_next = False  # the line after <doc …> repeats the title
    section = ""
    pending: list[tuple[int, str]] = []  # headings not yet followed by text
    start = 0  # 1 until the article's first sentence is out

    def paragraph(lineno: int, text: str, of: Article) -> Iterator[WikiSentence]:
        nonlocal start
        for sent in split_text(text):
            yield start, lineno, clip(lineno, sent), of, section
            start = 0

    for lineno, raw in lines:
        text = raw.strip()
        opened = doc_tag(text)
        if opened is not None:
            article, title_next, section, pending, start = opened, True, "", [], 1
            continue
        if article is None or not text:
            continue
        if title_next:
            title_next = False
            if html.unescape(text) == article.title:  # escaped as in the tag
                continue
        if text == "</doc>":
            for n, heading in pending:  # no text followed: they were sentences
                yield from paragraph(n, heading, article)
            article, pending = None, []
            continue
        if is_heading(text):
            pending.append((lineno, text))
            continue
        if pending:
            section = pending[-1][1][:-1]
            pending = []
        yield from paragraph(lineno, text, article)
