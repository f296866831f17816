"""qtsearch.text.read_options: how a corpus is read, as one value: its defaults are the
reader's, bad values are refused when read, and the manifest of a built records index gives
back the options its config had."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from qtsearch.core.errors import UsageError
from qtsearch.index.manifest import Manifest
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.reader import read_sentences
from qtsearch.text.records import PASSAGE_WORDS, RecordFields


def test_the_defaults_are_the_readers() -> None:
    assert ReadOptions() == ReadOptions(False, "auto", "file", PASSAGE_WORDS, RecordFields())
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReadOptions().split = True  # type: ignore[misc]


def test_bad_options_are_refused_when_read(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("One.\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--format"):
        list(read_sentences([f], options=ReadOptions(fmt="wiki")))
    with pytest.raises(UsageError, match="--docs"):
        list(read_sentences([f], options=ReadOptions(docs="page")))
    with pytest.raises(ValueError, match="split"):  # split said twice
        list(read_sentences([f], split=True, options=ReadOptions()))


def test_a_records_index_gives_back_its_read_options(tmp_path: Path) -> None:
    corpus = tmp_path / "notes.jsonl"
    corpus.write_text("".join(json.dumps({"key": f"n{i}", "heading": "Boats",
                                          "note": f"Boat {i} floats. It is number {i}."}) + "\n"
                              for i in range(6)), encoding="utf-8")
    config = IndexConfig(corpus=[str(corpus)], out=str(tmp_path / "index"), device="cpu",
                         input_format="records", passage_words=4, id_field="key",
                         title_field="heading", text_field="note")
    build_index(config)
    manifest = Manifest.read(tmp_path / "index")
    assert manifest.read_options() == config.read_options()
    assert manifest.read_options(True) == dataclasses.replace(config.read_options(), split=True)
