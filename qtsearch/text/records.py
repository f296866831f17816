"""Documents as records: JSON Lines, CSV/TSV and Parquet files (BEIR's `corpus.jsonl` as it
is), each record one document with an id, a title and a text.

A record's text is cut into passages: its sentences grouped in reading order into windows of
at most `passage_words` words (a sentence longer than that is a passage of its own), so a
short abstract stays one passage and a long article becomes several that remember their
document. Every passage starts with the document's title when it has one: the title is often
the most informative text of a document, and a passage is ranked on its own.

Field names are found by the common spellings (`_id`/`id`/`doc_id`, `title`/`name`,
`text`/`body`/`content`/`abstract`) unless given (`RecordFields`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qtsearch.core.errors import InputError

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


def _text_stream(path: Path) -> io.TextIOBase:
    raw = open(path, "rb")  # noqa: SIM115 - returned open; the caller closes it
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return io.TextIOWrapper(gzip.GzipFile(fileobj=raw), encoding="utf-8", errors="replace")
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace")


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    name = path.name.lower().removesuffix(".gz")
    try:
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
                yield from batch.to_pylist()
            return
        with _text_stream(path) as fh:
            if name.endswith((".csv", ".tsv")):
                csv.field_size_limit(1 << 30)
                yield from csv.DictReader(fh, delimiter="\t" if name.endswith(".tsv") else ",")
                return
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{lineno}: not a JSON object ({e.msg})") from e
                if not isinstance(row, dict):
                    raise InputError(f"{path}:{lineno}: a record must be a JSON object, not "
                                     f"{type(row).__name__}")
                yield row
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: cannot be read as records ({e})") from e
    except Exception as e:  # pyarrow's and csv's own errors: one line naming the file
        if isinstance(e, InputError):
            raise
        raise InputError(f"{path}: cannot be read as records ({type(e).__name__}: {e})") from e


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


def read_documents(path: Path, fields: RecordFields = RecordFields()) -> Iterator[Document]:
    """Every record of one file as a document of sentences, in file order. A record with
    neither text nor title is skipped (its number is still taken); a file with no text field
    at all is an InputError."""
    # imported here: the CLI reads PASSAGE_WORDS for its help without loading the splitter
    from qtsearch.text.splitter import split_text

    text_field = None
    for n, row in enumerate(_rows(path), 1):
        if text_field is None:
            text_field = _field(row, fields.text, TEXT_FIELDS)
            if text_field is None:
                wanted = fields.text or "/".join(TEXT_FIELDS)
                raise InputError(f"{path}: record 1 has no {wanted} field (its fields: "
                                 f"{', '.join(map(str, row))}); name it with --text-field")
        id_field = _field(row, fields.id, ID_FIELDS)
        title_field = _field(row, fields.title, TITLE_FIELDS)
        doc_id = None if id_field is None or row[id_field] is None else str(row[id_field])
        title = str(row[title_field]).strip() if title_field and row[title_field] else None
        body = row.get(text_field)
        text = " ".join(str(body).split()) if body is not None else ""
        if text or title:
            yield Document(n, doc_id, title or None, split_text(text) if text else [])


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
