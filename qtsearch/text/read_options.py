"""How a corpus is read (`ReadOptions`): what `read_sentences` takes, what a build's config
sets, what the manifest records so that `add` reads more text the same way, and what the
build's resume key depends on."""

from __future__ import annotations

from dataclasses import dataclass, field

from qtsearch.core.errors import UsageError
from qtsearch.text.records import PASSAGE_WORDS, RecordFields

#: Input formats: auto (records by file name, WikiExtractor where a file starts with `<doc …>`,
#: else text), text (lines or running text, as `split` says), wikiextractor (every file must be
#: one), records (every file must be JSON Lines, CSV/TSV or Parquet).
FORMATS = ("auto", "text", "wikiextractor", "records")
#: What a document is in running text (`split=True`): a whole file, or each paragraph.
DOC_UNITS = ("file", "paragraph")


@dataclass(frozen=True)
class ReadOptions:
    """How a corpus is read: `split` text files as running text (else one sentence a line),
    `fmt` one of FORMATS, `docs` one of DOC_UNITS (running text), and how records are read
    (`passage_words` words a passage, 0: one passage a record; `fields`, qtsearch.text.records).
    """

    split: bool = False
    fmt: str = "auto"
    docs: str = "file"
    passage_words: int = PASSAGE_WORDS
    fields: RecordFields = field(default_factory=RecordFields)

    def check(self) -> None:
        """UsageError unless `fmt` and `docs` are ones the reader knows."""
        check_format(self.fmt)
        check_docs(self.docs)


def check_format(fmt: str) -> None:
    """UsageError unless `fmt` is one of FORMATS."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def check_docs(docs: str) -> None:
    """UsageError unless `docs` is one of DOC_UNITS."""
    if docs not in DOC_UNITS:
        raise UsageError(f"--docs must be one of {', '.join(DOC_UNITS)}, not {docs!r}")
