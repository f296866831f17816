"""Where an index's lexical leg lives after every way an index is made. A build, `add`,
`delete` and a derived build write BM25 files over every row and no FTS5 table; an index built
before the BM25 files keeps its FTS5 table holding exactly the vectors' rows, with the same ids,
through `add`, `delete` and a derived build (its searches still read it where a query has only
stop-words)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import as_built, fts_ids, killed_run, run_cli
from conftest import wikitext_slice

import qtsearch
from qtsearch.index import read_manifest
from qtsearch.index.faiss_backend import FaissBackend
from qtsearch.index.store import MetadataStore
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.derive import build_from_index
from qtsearch.indexing.pipeline import IndexConfig, build_index


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory) -> Path:
    return wikitext_slice(shared_data, tmp_path_factory, 120_000)


@pytest.fixture(scope="module")
def built(corpus, tiny_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fts") / "wiki"
    build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model), out=str(out),
                            index="flat", split_sentences=True, shard_size=300))
    return out


@pytest.fixture
def old(built, tmp_path) -> Path:
    """An index as an earlier qtsearch built it: the same rows with an FTS5 table over them."""
    folder = tmp_path / "old"
    shutil.copytree(built, folder)
    with MetadataStore.open(folder / "meta.sqlite", readonly=False) as store:
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    as_built(folder)
    return folder


def has_table(folder: Path) -> bool:
    with MetadataStore.open(folder / "meta.sqlite") as store:
        return store.has_fts()


def bm25_rows(folder: Path) -> int:
    return json.loads((folder / "bm25" / "info.json").read_text())["rows"]


def vectors(folder: Path) -> int:
    return FaissBackend.open(folder / "index.faiss").ntotal  # rows, also of a folded graph


def assert_fts_matches_vectors(folder: Path) -> None:
    assert fts_ids(folder) == list(range(vectors(folder)))
    conn = sqlite3.connect(folder / "meta.sqlite")
    try:
        rows = conn.execute("SELECT id, text FROM sentences ORDER BY id").fetchall()
        for rowid, text in rows[:: max(1, len(rows) // 25)]:
            word = max(re.findall(r"[A-Za-z]{4,}", text) or ["x"], key=len)
            hits = {r[0] for r in conn.execute(
                "SELECT rowid FROM sentences_fts WHERE sentences_fts MATCH ?", (f'"{word}"',))}
            assert word == "x" or rowid in hits, (rowid, word)
    finally:
        conn.close()


def more_text(tmp_path: Path) -> Path:
    more = tmp_path / "more.txt"
    more.write_text("A zeppelinlike craft drifted over the harbour.\nAnother new line.\n",
                    encoding="utf-8")
    return more


def delete_some(folder: Path) -> None:
    with qtsearch.Index.open(folder) as index:
        line = index.get([len(index) // 2])[0].line
        assert index.delete(where={"line": line}).deleted > 0


def test_a_build_writes_bm25_files_over_every_row_and_no_table(built):
    assert not has_table(built) and bm25_rows(built) == vectors(built) > 0
    assert read_manifest(built)["fts"] is False


def test_add_and_delete_write_no_table(built, tmp_path):
    folder = tmp_path / "wiki"
    shutil.copytree(built, folder)
    assert add_to_index(folder, [str(more_text(tmp_path))]).added == 2
    assert not has_table(folder) and bm25_rows(folder) == vectors(folder)
    assert read_manifest(folder)["fts"] is False
    delete_some(folder)
    assert not has_table(folder) and bm25_rows(folder) == vectors(folder)


def test_add_indexes_only_the_new_rows_of_an_old_table(old, tmp_path):
    before = len(fts_ids(old))
    assert add_to_index(old, [str(more_text(tmp_path))]).added == 2
    assert len(fts_ids(old)) == before + 2 and read_manifest(old)["fts"] is True
    assert_fts_matches_vectors(old)
    conn = sqlite3.connect(old / "meta.sqlite")
    hit = conn.execute("SELECT rowid FROM sentences_fts WHERE sentences_fts MATCH "
                       "'zeppelinlike'").fetchall()
    conn.close()
    assert hit == [(before,)]


def test_delete_keeps_an_old_table_whole(old):
    before = vectors(old)
    delete_some(old)
    assert vectors(old) < before and bm25_rows(old) == vectors(old)
    assert_fts_matches_vectors(old)


def test_a_derived_build_keeps_what_its_source_has(built, old, tmp_path):
    new = build_from_index(built, tmp_path / "hnsw", "hnsw")
    assert not has_table(new.path) and new.manifest["fts"] is False
    derived = build_from_index(old, tmp_path / "old-hnsw", "hnsw")
    assert_fts_matches_vectors(derived.path)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
def test_killed_in_the_bm25_build_then_rerun(corpus, tiny_model, tmp_path, when):
    """SIGKILL just before / after the BM25 files are written: the rerun's files are whole."""
    out = tmp_path / "wiki"
    argv = ["build-index", str(corpus), "--model", str(tiny_model), "--out", str(out),
            "--split-sentences", "--index", "flat", "--shard-size", "300", "--device", "cpu",
            "-q"]
    killed_run("qtsearch.index.bm25:build_from", when, 1, argv)
    assert not out.exists() and (tmp_path / "wiki.partial").is_dir()
    code, _ = run_cli(*argv)
    assert code == 0
    assert not has_table(out) and bm25_rows(out) == vectors(out)
