"""qtsearch.lifecycle.inputs: what `Index.build`, `add` and `upsert` take (a path, texts,
records of id → text, texts and paths mixed) as the files the writers read."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from qtsearch.core.errors import InputError, UsageError
from qtsearch.lifecycle.inputs import RECORDS_FILE, TEXTS_FILE, corpus_files
from qtsearch.text.records import RecordFields


def test_a_path_is_read_as_it_is(tmp_path: Path) -> None:
    with corpus_files(tmp_path / "books") as paths:
        assert paths == [str(tmp_path / "books")]
    with corpus_files("emma.txt") as paths:
        assert paths == ["emma.txt"]


def test_texts_are_one_line_each_in_a_temporary_file() -> None:
    with corpus_files(["It rained.", "  The sun\ncame   out. ", "Fine."]) as paths:
        (path,) = paths
        assert Path(path).name == TEXTS_FILE
        assert Path(path).read_text(encoding="utf-8") == \
            "It rained.\nThe sun came out.\nFine.\n"
    assert not Path(path).exists() and not Path(path).parent.exists()  # gone after the block


def test_running_text_is_kept_apart_by_blank_lines() -> None:
    with corpus_files(["First text. Two sentences.", "Second."], split=True) as (path,):
        assert Path(path).read_text(encoding="utf-8") == \
            "First text. Two sentences.\n\nSecond.\n"


def test_records_are_written_as_jsonl_with_their_ids() -> None:
    with corpus_files({"a1": "Café  au lait.", "b2": "Tea\nfor two."}) as (path,):
        assert Path(path).name == RECORDS_FILE
        rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]
    assert rows == [{"id": "a1", "text": "Café au lait."}, {"id": "b2", "text": "Tea for two."}]


def test_records_use_the_field_names_given() -> None:
    fields = RecordFields(id="key", title=None, text="body")
    with corpus_files({"k": "Words."}, fields=fields) as (path,):
        assert json.loads(Path(path).read_text(encoding="utf-8")) == {"key": "k",
                                                                      "body": "Words."}


def test_texts_and_paths_mixed(tmp_path: Path) -> None:
    book = tmp_path / "book.txt"
    book.write_text("A book.\n")
    with corpus_files(["A text.", book, "Another."]) as paths:
        assert paths[0] == str(book) and Path(paths[1]).name == TEXTS_FILE
        assert Path(paths[1]).read_text(encoding="utf-8") == "A text.\nAnother.\n"
    with corpus_files([book]) as paths:  # paths alone: no texts file
        assert paths == [str(book)]


def test_a_string_naming_a_file_is_a_text_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    book = tmp_path / "book.txt"
    book.write_text("A book.\n")
    with caplog.at_level(logging.WARNING, logger="qtsearch"), corpus_files([str(book)]) as (p,):
        assert Path(p).read_text(encoding="utf-8") == f"{book}\n"
    assert f"pass Path('{book}') to read the file" in caplog.text


@pytest.mark.parametrize(("source", "error", "message"), [
    ([], InputError, "no texts or paths given"),
    ({}, InputError, "no records given"),
    (["fine", "   \n "], InputError, "an empty text: every text needs a word"),
    (["fine", 3], UsageError, "a text must be a string, not int"),
    ({"a": None}, UsageError, "a text must be a string, not NoneType"),
    ({"": "text"}, UsageError, "a record id must be a non-empty string, not ''"),
    ({7: "text"}, UsageError, "a record id must be a non-empty string, not 7"),
])
def test_bad_inputs_are_refused(source: object, error: type, message: str) -> None:
    with pytest.raises(error) as e, corpus_files(source):  # type: ignore[arg-type]
        pass
    assert str(e.value) == message
