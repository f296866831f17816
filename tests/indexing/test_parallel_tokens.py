"""Tokenising in worker processes (qtsearch.indexing.tokens) gives exactly the serial path's ids,
and a build that uses it exactly the serial build's rows and vectors."""

from __future__ import annotations

import itertools
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.files import PIECES
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import INDEX_FILE, META_FILE, open_faiss_index
from qtsearch.indexing import tokens
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.text.reader import read_sentences

EMMA = "gutenberg/0003-austen-jane--emma.txt.gz"


@pytest.fixture(scope="module")
def closed_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped model without its pieces table: workers tokenise for closed vocabularies
    (an open one numbers new words as it meets them, so its build tokenises in one process)."""
    folder = tmp_path_factory.mktemp("closed") / "model"
    shutil.copytree(DEFAULT_MODEL, folder, ignore=shutil.ignore_patterns(PIECES))
    return folder


@pytest.fixture(scope="module")
def encoder(closed_model: Path):
    return load_encoder(closed_model, device="cpu")  # the shipped model's real vocabulary


def test_workers_tokenise_a_real_book_exactly_as_the_encoder(shared_data: Path,
                                                              encoder) -> None:
    texts = [s.text for s in read_sentences([shared_data / EMMA], split=True)]
    assert len(texts) > 7000
    # shards of unequal sizes, one spanning several tasks and one empty
    cuts = [0, 10, 10, tokens.CHUNK * 2 + 7, len(texts)]
    shards = [texts[a:b] for a, b in itertools.pairwise(cuts)]
    parallel = list(tokens.token_shards(lambda i: shards[i], list(range(len(shards))),
                                        encoder.vocab, encoder.max_len, workers=2))
    assert [len(ids) for ids in parallel] == [len(s) for s in shards]
    assert parallel == [[encoder.token_ids(t) for t in s] for s in shards]


def test_no_workers_for_the_cpu_or_a_small_build() -> None:
    big = tokens.MIN_SENTENCES
    assert tokens.workers_for(big, "cpu") == 0
    assert tokens.workers_for(big - 1, "cuda") == 0
    assert tokens.workers_for(big, "cuda") == max(0, tokens.cpus() - 1)


def _rows_and_vectors(index: Path) -> tuple[list[tuple], np.ndarray]:
    with sqlite3.connect(index / META_FILE) as db:
        rows = db.execute("SELECT * FROM sentences ORDER BY id").fetchall()
    faiss_index = open_faiss_index(index / INDEX_FILE)
    return rows, faiss_index.reconstruct_n(0, faiss_index.ntotal)


def test_a_build_tokenised_by_workers_equals_the_serial_build(
        tmp_path: Path, emma_lines: Path, closed_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def build(out: Path) -> tuple[list[tuple], np.ndarray]:
        build_index(IndexConfig(corpus=[str(emma_lines)], out=str(out), index="flat",
                                model=str(closed_model),
                                device="cpu", shard_size=250, fit="none"))
        return _rows_and_vectors(out)

    serial_rows, serial_vectors = build(tmp_path / "serial")
    used: list[int] = []

    def two_workers(count: int, device: str) -> int:
        used.append(count)
        return 2

    monkeypatch.setattr(tokens, "workers_for", two_workers)
    rows, vectors = build(tmp_path / "workers")
    assert used == [900]  # 900 sentences in 4 shards went through the workers
    assert rows == serial_rows and len(rows) == 900
    np.testing.assert_array_equal(vectors, serial_vectors)
