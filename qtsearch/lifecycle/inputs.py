"""What `Index.build`, `add` and `upsert` take, as the files the writers read.

The writers read files (they record each one's path and checksum, and resume by them), so
texts given as strings are written to a file first: a list of strings to `texts.txt`, one
text a line; a mapping of record id to text to `records.jsonl`, whose ids `delete` and
`upsert` then find. Each call writes into a fresh temporary folder, so the rows' `source` is
that file (`where={"source": "texts.txt"}` finds every text given as a string).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from qtsearch.core.errors import InputError, UsageError
from qtsearch.text.records import ID_FIELDS, TEXT_FIELDS, RecordFields

log = logging.getLogger("qtsearch")

#: What the facade reads: a file or folder, records (id → text), or strings (texts) and
#: paths mixed.
Source = str | os.PathLike | Mapping[str, str] | Iterable[str | os.PathLike]
TEXTS_FILE = "texts.txt"
RECORDS_FILE = "records.jsonl"


def _one_line(text: object) -> str:
    if not isinstance(text, str):
        raise UsageError(f"a text must be a string, not {type(text).__name__}")
    line = " ".join(text.split())  # a text stays one row: line breaks inside it are spaces
    if not line:
        raise InputError("an empty text: every text needs a word")
    return line


def _write_texts(folder: Path, texts: list[str], split: bool) -> Path:
    for text in texts:
        if isinstance(text, str) and len(text) < 4096 and os.path.isfile(text):
            log.warning("%r is indexed as a text; pass Path(%r) to read the file", text, text)
    path = folder / TEXTS_FILE
    # running text is split by paragraph: a blank line keeps one text's end off the next's
    sep = "\n\n" if split else "\n"
    path.write_text(sep.join(_one_line(t) for t in texts) + "\n", encoding="utf-8")
    return path


def _write_records(folder: Path, records: Mapping[str, str], fields: RecordFields) -> Path:
    id_name, text_name = fields.id or ID_FIELDS[1], fields.text or TEXT_FIELDS[0]
    path = folder / RECORDS_FILE
    with path.open("w", encoding="utf-8") as fh:
        for key, text in records.items():
            if not isinstance(key, str) or not key:
                raise UsageError(f"a record id must be a non-empty string, not {key!r}")
            fh.write(json.dumps({id_name: key, text_name: _one_line(text)},
                                ensure_ascii=False) + "\n")
    return path


@contextlib.contextmanager
def corpus_files(source: Source, split: bool = False,
                 fields: RecordFields = RecordFields()) -> Iterator[list[str]]:
    """The paths the writers read for `source`: a str or path is a file or folder; a mapping
    is records (id → text); any other iterable holds texts (str) and files or folders
    (`pathlib.Path`), mixed. Texts and records live in a temporary folder for the block.
    `split`: whether the texts are running text, `fields` the names records are read by."""
    if isinstance(source, str | os.PathLike):
        yield [os.fspath(source)]
        return
    with tempfile.TemporaryDirectory(prefix="qtsearch-texts-") as tmp:
        if isinstance(source, Mapping):
            if not source:
                raise InputError("no records given")
            yield [str(_write_records(Path(tmp), source, fields))]
            return
        items = list(source)
        paths = [os.fspath(p) for p in items if isinstance(p, os.PathLike)]
        texts = [t for t in items if not isinstance(t, os.PathLike)]
        if not items:
            raise InputError("no texts or paths given")
        yield paths + ([str(_write_texts(Path(tmp), texts, split))] if texts else [])
