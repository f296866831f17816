"""The full-text table (FTS5) holds exactly the vectors' rows, with the same ids, after every way
an index is made: a build, `add` (also on an index built before the table existed), a derived
build, and a build killed mid-way and rerun."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import as_built, fts_ids, killed_run, run_cli
from conftest import wikitext_slice

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


def assert_fts_matches_vectors(folder: Path) -> None:
    n = FaissBackend.open(folder / "index.faiss").ntotal  # rows, also of a folded graph
    assert fts_ids(folder) == list(range(n))
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


def test_build_fills_the_full_text_table(built):
    with MetadataStore.open(built / "meta.sqlite") as store:
        assert store.has_fts()
    assert_fts_matches_vectors(built)
    m = read_manifest(built)
    assert m["fts"] is True


def test_add_indexes_only_the_new_rows(built, tmp_path):
    folder = tmp_path / "wiki"
    shutil.copytree(built, folder)
    before = len(fts_ids(folder))
    more = tmp_path / "more.txt"
    more.write_text("A zeppelinlike craft drifted over the harbour.\nAnother new line.\n",
                    encoding="utf-8")
    result = add_to_index(folder, [str(more)])
    assert result.added == 2 and len(fts_ids(folder)) == before + 2
    assert_fts_matches_vectors(folder)
    conn = sqlite3.connect(folder / "meta.sqlite")
    hit = conn.execute("SELECT rowid FROM sentences_fts WHERE sentences_fts MATCH "
                       "'zeppelinlike'").fetchall()
    conn.close()
    assert hit == [(before,)]


def test_add_gives_an_old_index_the_whole_table(built, tmp_path):
    """An index from before the full-text table (simulated by dropping it) gets every row."""
    folder = tmp_path / "old"
    shutil.copytree(built, folder)
    conn = sqlite3.connect(folder / "meta.sqlite")
    conn.execute("DROP TABLE sentences_fts")
    conn.commit()
    conn.close()
    as_built(folder)
    with MetadataStore.open(folder / "meta.sqlite") as store:
        assert not store.has_fts()
    more = tmp_path / "more.txt"
    more.write_text("One more sentence.\n", encoding="utf-8")
    add_to_index(folder, [str(more)])
    assert_fts_matches_vectors(folder)


def test_derived_build_keeps_the_table(built, tmp_path):
    result = build_from_index(built, tmp_path / "hnsw", "hnsw")
    assert result.manifest["fts"] is True
    assert_fts_matches_vectors(result.path)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
def test_killed_in_the_fts_fill_then_rerun(corpus, tiny_model, tmp_path, when):
    """SIGKILL just before / after the table is filled: the rerun's table is whole."""
    out = tmp_path / "wiki"
    argv = ["build-index", str(corpus), "--model", str(tiny_model), "--out", str(out),
            "--split-sentences", "--index", "flat", "--shard-size", "300", "--device", "cpu",
            "-q"]
    killed_run("qtsearch.index.store:MetadataStore.fts_fill", when, 1, argv)
    assert not out.exists() and (tmp_path / "wiki.partial").is_dir()
    code, _ = run_cli(*argv)
    assert code == 0
    assert_fts_matches_vectors(out)
