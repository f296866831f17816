"""Documents as records: JSON Lines, CSV/TSV and Parquet files (BEIR's `corpus.jsonl` as it
is), each record one document with an id, a title and a text.

A record's text is cut into passages: its sentences grouped in reading order into windows of
at most `passage_words` words (a sentence longer than that is a passage of its own), so a
short abstract stays one passage and a long article becomes several that remember their
document. Every passage starts with the document's title when it has one: the title is often
the most informative text of a document, and a passage is ranked on its own.

Field names are found by the common spellings (`_id`/`id`/`doc_id`, `title`/`name`,
`text`/`body`/`content`/`abstract`) unless given (`RecordFields`).

Records are bounded like text lines (qtsearch.text.limits): a text is cut at MAX_RECORD_CHARS
characters, each of its sentences and the title at MAX_SENTENCE_CHARS. A value that is not a
string is written as JSON (numbers, booleans, lists, objects); null, NaN and infinity are no
value. Where one file repeats an id, its last record wins. What reading a file met beyond
plain records (records without text, cut, replaced) is one warning at the end of the file
that counts each kind; each record is named by its line at the INFO level (`--verbose`).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtsearch.core.errors import InputError
from qtsearch.text.limits import MAX_RECORD_CHARS, MAX_SENTENCE_CHARS
from qtsearch.text.record_rows import rows

log = logging.getLogger("qtsearch")

#: File endings read as records (a folder given as input contributes these files too).
RECORD_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz", ".json.gz", ".csv",
                   ".csv.gz", ".tsv", ".tsv.gz", ".parquet")
#: Words a passage may hold before the next sentence starts another one. Measured with
#: `qtsearch bench retrieval` (docs/retrieval.md): most abstracts fit in one passage.
PASSAGE_WORDS = 200
ID_FIELDS = ("_id", "id", "doc_id", "docid")
TITLE_FIELDS = ("title", "name", "headline")
TEXT_FIELDS = ("text", "body", "content", "abstract", "contents")


@dataclass(frozen=True)
class RecordFields:
    """Which field holds the id, the title and the text (None: the first common name found)."""

    id: str | None = None
    title: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class Passage:
    """One passage of one record: its text, the record's number in its file (1-based, the
    `line` of the row), its position within the record, the record's id and title."""

    text: str
    record: int
    position: int
    doc_id: str | None
    title: str | None


def is_records(path: str | os.PathLike) -> bool:
    """Whether the file's name says it holds records."""
    return Path(path).name.lower().endswith(RECORD_SUFFIXES)


def _field(row: dict[str, Any], given: str | None, common: tuple[str, ...]) -> str | None:
    if given is not None:
        return given if given in row else None
    return next((f for f in common if f in row), None)


def passages(words: list[str], sentences: list[str], limit: int) -> list[str]:
    """Sentences grouped in order into passages of at most `limit` words (`words[i]` is the
    word count of sentence i); 0 or less keeps them all in one passage."""
    if limit <= 0:
        return [" ".join(sentences)] if sentences else []
    out: list[str] = []
    current: list[str] = []
    size = 0
    for n, sentence in zip(words, sentences, strict=True):
        if current and size + n > limit:
            out.append(" ".join(current))
            current, size = [], 0
        current.append(sentence)
        size += n
    if current:
        out.append(" ".join(current))
    return out


@dataclass(frozen=True)
class Document:
    """One record as a document: its number in the file (1-based), id, title and sentences."""

    record: int
    doc_id: str | None
    title: str | None
    sentences: list[str]


def _value(value: Any) -> str | None:
    """A field's value as text: a string as it is; numbers, booleans, lists and objects as
    JSON (never a Python repr); null, NaN and infinity as no value."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class _Tally:
    """What one file's records met beyond plain text, counted for the warning at its end."""

    path: Path
    counts: dict[str, int] = field(default_factory=dict)

    def note(self, kind: str, line: int, what: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        log.info("%s:%d: %s", self.path, line, what)

    def warn(self) -> None:
        phrases = {"skipped": "skipped (neither text nor title)",
                   "title only": "indexed by their title alone (no text)",
                   "cut": f"cut (texts at {MAX_RECORD_CHARS:,} characters, sentences and "
                          f"titles at {MAX_SENTENCE_CHARS:,})",
                   "replaced": "replaced by a later record with the same id"}
        said = [f"{self.counts[k]:,} {p}" for k, p in phrases.items() if self.counts.get(k)]
        if said:
            log.warning("%s: records %s (--verbose names their lines)", self.path,
                        "; ".join(said))


def _repeated_ids(path: Path, fields: RecordFields) -> dict[str, int]:
    """{id: number of its last record} for each id that more than one record of the file
    has (a first pass: the last record of an id wins, and reading stays streamed)."""
    seen: set[str] = set()
    last: dict[str, int] = {}
    for n, (_, row) in enumerate(rows(path), 1):
        id_field = _field(row, fields.id, ID_FIELDS)
        doc_id = _value(row[id_field]) if id_field else None
        if doc_id is None:
            continue
        if doc_id in seen:
            last[doc_id] = n
        seen.add(doc_id)
    return last


def _clip(text: str, limit: int, cuts: list[str], what: str) -> str:
    if len(text) <= limit:
        return text
    # the length as read, not as written: an over-long JSON line was cut while it was read
    cuts.append(f"{what} cut to {limit:,} characters")
    return text[:limit]


def read_documents(path: Path, fields: RecordFields = RecordFields()) -> Iterator[Document]:
    """Every record of one file as a document of sentences, in file order, bounded as the
    module says. A record with neither text nor title is skipped (its number is still taken),
    as is one whose id a later record of the file repeats; a file with no text field at all
    is an InputError. At the end of the file, one warning counts what was skipped, cut or
    replaced."""
    # imported here: the CLI reads PASSAGE_WORDS for its help without loading the splitter
    from qtsearch.text.splitter import split_text

    repeated = _repeated_ids(path, fields)
    tally = _Tally(path)
    text_field = None
    for n, (line, row) in enumerate(rows(path), 1):
        if text_field is None:
            text_field = _field(row, fields.text, TEXT_FIELDS)
            if text_field is None:
                wanted = fields.text or "/".join(TEXT_FIELDS)
                raise InputError(f"{path}: record 1 has no {wanted} field (its fields: "
                                 f"{', '.join(map(str, row))}); name it with --text-field")
        id_field = _field(row, fields.id, ID_FIELDS)
        title_field = _field(row, fields.title, TITLE_FIELDS)
        doc_id = _value(row[id_field]) if id_field else None
        if doc_id in repeated and repeated[doc_id] != n:
            tally.note("replaced", line, f"record {doc_id!r} replaced by a later one")
            continue
        cuts: list[str] = []
        title = _clip(" ".join((_value(row.get(title_field)) or "").split()),
                      MAX_SENTENCE_CHARS, cuts, "title")
        missing = text_field not in row
        text = _clip(_value(row.get(text_field)) or "", MAX_RECORD_CHARS, cuts, "text")
        del row  # a long record's whole text is not kept while its cut text is split
        text = " ".join(text.split())
        if not text:
            why = f"no {text_field} field" if missing else "an empty text"
            tally.note("title only" if title else "skipped", line,
                       f"record {'indexed by its title alone' if title else 'skipped'}: {why}")
            if not title:
                continue
        sentences = [_clip(x, MAX_SENTENCE_CHARS, cuts, "sentence")
                     for x in (split_text(text) if text else [])]
        if cuts:
            tally.note("cut", line, "; ".join(cuts))
        yield Document(n, doc_id, title or None, sentences)
    tally.warn()


def read_records(path: Path, fields: RecordFields = RecordFields(),
                 passage_words: int = PASSAGE_WORDS) -> Iterator[Passage]:
    """The passages of every record of one file, in file order (`read_documents`' documents,
    their sentences grouped into passages that start with the title)."""
    for doc in read_documents(path, fields):
        chunks = passages([len(s.split()) for s in doc.sentences], doc.sentences,
                          passage_words)
        if doc.title:
            head = doc.title if doc.title[-1:] in ".!?:" else f"{doc.title}."
            chunks = [f"{head} {c}" for c in chunks] or [head]
        for position, chunk in enumerate(chunks):
            yield Passage(chunk, doc.record, position, doc.doc_id, doc.title)
