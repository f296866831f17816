"""Tokenising in worker processes (qtsearch.indexing.tokens) gives exactly the serial path's ids,
and a build that uses it exactly the serial build's rows and vectors."""

from __future__ import annotations

import gzip
import itertools
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.device import cpus
from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.files import PIECES
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import INDEX_FILE, META_FILE, open_faiss_index
from qtsearch.indexing import tokens
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.text.reader import read_sentences

EMMA = "gutenberg/0003-austen-jane--emma.txt.gz"
#: Texts whose ids take the lookup's other ways: no token (one <unk>), words known in another
#: casing only, a word composed in several casings, a new word past the model's max_len (cut).
EDGES = ["", " \t ", "CAPITAL OF FRANCE", "Zyxqorb ZYXQORB zyxqorb",
         "word " * 4100 + "Zyxqorbian"]
SCIFACT = "beir/scifact/corpus.jsonl.gz"


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
    assert [[a.tolist() for a in ids] for ids in parallel] == \
        [[encoder.token_ids(t) for t in s] for s in shards]


def test_workers_give_an_open_vocabulary_the_serial_ids_and_rows(shared_data: Path) -> None:
    """The shipped model composes the words its table lacks and numbers them as it meets
    them: through the workers (which look words up and compose, the parent numbering them),
    SciFact abstracts get the serial path's ids, and the table the same rows in the same
    order, word after word."""
    texts = []
    with gzip.open(shared_data / SCIFACT, "rt", encoding="utf-8") as fh:
        for line in itertools.islice(fh, 1500):
            record = json.loads(line)
            texts.extend(f"{record['title']}. {record['text']}".split(". "))
    shards = [texts[:3000], texts[3000:3001], [], EDGES + texts[3001:]]
    serial, parallel = load_encoder(DEFAULT_MODEL, device="cpu"), \
        load_encoder(DEFAULT_MODEL, device="cpu")
    assert serial.open_vocab is not None and parallel.open_vocab is not None
    expected = [[serial.token_ids(t) for t in s] for s in shards]
    got = list(tokens.token_shards(lambda i: shards[i], list(range(len(shards))),
                                   parallel.vocab, parallel.max_len, 2, parallel.open_vocab))
    assert [[a.tolist() for a in ids] for ids in got] == expected
    composed = len(serial.open_vocab.table) - serial.open_vocab.table.base
    assert composed > 1000  # the abstracts' own words, many of them
    assert serial.open_vocab.composed == parallel.open_vocab.composed
    np.testing.assert_array_equal(parallel.open_vocab.table.view(),
                                  serial.open_vocab.table.view())


def test_workers_for_the_gpu_and_a_light_encoder_only() -> None:
    big = tokens.MIN_SENTENCES
    assert tokens.workers_for(big, "cpu") == 0
    assert tokens.workers_for(big - 1, "cuda") == 0
    assert tokens.workers_for(big - 1, "cpu", light=True) == 0
    many = cpus() >= 2
    assert tokens.workers_for(big, "cuda") == (cpus() - 1 if many else 0)
    assert tokens.workers_for(big, "cpu", light=True) == (cpus() if many else 0)


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

    def two_workers(count: int, device: str, light: bool = False) -> int:
        used.append(count)
        return 2

    monkeypatch.setattr(tokens, "workers_for", two_workers)
    rows, vectors = build(tmp_path / "workers")
    assert used == [900]  # 900 sentences in 4 shards went through the workers
    assert rows == serial_rows and len(rows) == 900
    np.testing.assert_array_equal(vectors, serial_vectors)
