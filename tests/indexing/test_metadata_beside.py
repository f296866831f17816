"""A big build runs its metadata stage in a thread beside the embed and index stages: the same
files as one stage after the other, and a failure on either side ends the build with the
failing side's error, the other side stopped, and a rerun that finishes it. Here "big" is
lowered to a few thousand WikiText sentences with the shipped model."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import wikitext_slice
from safetensors.numpy import load_file

from qtsearch.core.errors import Interrupted, OutputError
from qtsearch.index import bm25
from qtsearch.indexing import metadata_stage, state
from qtsearch.indexing.pipeline import Builder, IndexConfig, build_index

CORPUS_BYTES = 300_000
SAME_FILES = ("index.faiss", *(f"{bm25.FOLDER}/{name}" for name in bm25.FILES))


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    return wikitext_slice(shared_data, tmp_path_factory, CORPUS_BYTES)


def config(corpus: Path, out: Path) -> IndexConfig:
    return IndexConfig(corpus=[str(corpus)], out=str(out), index="sq8", split_sentences=True,
                       shard_size=500)


@pytest.fixture
def beside(monkeypatch):
    """Builds of any size on 2 CPUs or more run the metadata stage beside the others."""
    monkeypatch.setattr(state, "BESIDE_FROM", 1)
    monkeypatch.setattr(state, "cpus", lambda: 2)


def assert_same_index(got: Path, want: Path) -> None:
    """The same vectors, BM25 files, rows and corpus words (a safetensors header's keys come
    in any order)."""
    for name in SAME_FILES:
        assert (got / name).read_bytes() == (want / name).read_bytes(), name
    assert rows(got) == rows(want)
    a, b = (load_file(folder / "corpus_words.safetensors") for folder in (got, want))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def rows(index: Path) -> list[tuple]:
    with sqlite3.connect(index / "meta.sqlite") as conn:
        return conn.execute("SELECT * FROM sentences ORDER BY id").fetchall()


@pytest.fixture(scope="module")
def one_after_the_other(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "idx"
    result = build_index(config(corpus, out))
    assert result.manifest["build"]["parallel_stages"] is False
    return out


def test_beside_the_others_the_files_are_the_same(corpus, tmp_path, beside,
                                                   one_after_the_other):
    out = tmp_path / "idx"
    result = build_index(config(corpus, out))
    assert result.manifest["build"]["parallel_stages"] == state.BESIDE_EMBED
    assert_same_index(out, one_after_the_other)
    assert not [t for t in threading.enumerate() if t.name.startswith("qtsearch-beside")]


def test_ctrl_c_in_the_index_stage_stops_the_metadata_stage(corpus, tmp_path, beside,
                                                              monkeypatch, one_after_the_other):
    out = tmp_path / "idx"
    seen: dict[str, bool] = {}
    write_for, entered = bm25.write_for, threading.Event()

    def slow_write_for(*args, **kwargs):  # the BM25 files begin after Ctrl-C has come
        entered.set()
        seen["stop"] = kwargs["stop"].wait(60)
        return write_for(*args, **kwargs)

    def interrupted(self, dim):  # Ctrl-C once the metadata stage is in its BM25 step
        assert entered.wait(60)
        raise KeyboardInterrupt

    monkeypatch.setattr(metadata_stage.bm25, "write_for", slow_write_for)
    monkeypatch.setattr(Builder, "_index", interrupted)
    with pytest.raises(Interrupted, match="run the same command again"):
        build_index(config(corpus, out))
    assert seen == {"stop": True}  # asked to stop, and it did: no BM25 files were written
    assert not (out.with_name("idx.partial") / bm25.FOLDER).exists()
    assert not [t for t in threading.enumerate() if t.name.startswith("qtsearch-beside")]
    monkeypatch.undo()
    result = build_index(config(corpus, out))  # the rerun keeps the embedded shards
    assert "read" in result.resumed and result.manifest["count"] == len(rows(one_after_the_other))
    assert_same_index(out, one_after_the_other)


def test_a_failed_metadata_stage_ends_the_build_with_its_error(corpus, tmp_path, beside,
                                                               monkeypatch):
    out = tmp_path / "idx"
    indexed, failing = [], threading.Event()
    embed = Builder._embed

    def full(*args, **kwargs):
        failing.set()
        raise OutputError(f"{out}.partial/bm25/rows.npy: no space left on the device")

    def embed_after_the_failure(self, encoder):
        assert failing.wait(60)
        embed(self, encoder)

    monkeypatch.setattr(metadata_stage.bm25, "write_for", full)
    monkeypatch.setattr(Builder, "_embed", embed_after_the_failure)
    monkeypatch.setattr(Builder, "_index", lambda self, dim: indexed.append(dim))
    with pytest.raises(OutputError, match="no space left"):
        build_index(config(corpus, out))
    assert not indexed  # said once the embed stage is done, not after the index stage
    assert not out.exists() and out.with_name("idx.partial").is_dir()
