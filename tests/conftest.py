"""Shared fixtures: the real data folder and one tiny model trained once per test session."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Two compute jobs with two threads each thrash a 2-core machine; tests stay single-threaded.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Each run has a cache of its own, so that no result depends on what an earlier run left there
# (distillations, vector caches, benchmark indexes). A QTSEARCH_CACHE set by the caller is kept:
# a developer may share one between edit-test runs on purpose.
if "QTSEARCH_CACHE" not in os.environ:
    os.environ["QTSEARCH_CACHE"] = tempfile.mkdtemp(prefix="qtsearch-test-cache-")
    atexit.register(shutil.rmtree, os.environ["QTSEARCH_CACHE"], ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
TINY_BOOKS = [
    "gutenberg/0003-austen-jane--emma.txt.gz",
    "gutenberg/0641-austen-jane--pride-and-prejudice.txt.gz",
]


def _shared() -> Path:
    if not (SHARED_DATA / "README.md").is_file():
        pytest.fail(f"the shared data folder is missing: expected it at {SHARED_DATA}")
    return SHARED_DATA


def wikitext_slice(shared: Path, factory: pytest.TempPathFactory, n_bytes: int) -> Path:
    """The first `n_bytes` of the WikiText-2 validation articles, cut at a line end."""
    text = (shared / "wikitext2" / "valid.txt").read_bytes()[:n_bytes]
    path = factory.mktemp("corpus") / "wiki.txt"
    path.write_bytes(text[: text.rfind(b"\n") + 1])
    return path


def small_yelp_data(shared: Path, root: Path) -> Path:
    """A real-data subset: the analogy files, Li's rewrites, the committed word-tuple sentences
    and the first lines of each Yelp file (a pool of ~3.5k sentences instead of 172k)."""
    from qtsearch.evaluation.analogy.build import DEFAULT_TUPLES, read_tuples
    from qtsearch.evaluation.analogy.data import REFERENCES, YELP_FILES

    tuples = read_tuples(DEFAULT_TUPLES)
    (root / "analogy").mkdir(parents=True)
    for name in ("questions-words.txt", "msr.txt"):
        shutil.copy(shared / "analogy" / name, root / "analogy" / name)
    for name in YELP_FILES:
        lines = (shared / "yelp" / name).read_text(encoding="utf-8").splitlines()[:150]
        if name == YELP_FILES[0]:
            lines += [s for t in tuples if t.task == "word" for s in t.sentences]
        (root / "yelp" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "yelp" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in REFERENCES:
        shutil.copy(shared / "yelp" / name, root / "yelp" / name)
    return root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the checkout (fails clearly when absent)."""
    return _shared()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small uni-GRU QT model trained on two real Austen novels (a few seconds on 1 core)."""
    import torch

    from qtsearch.training.configs import TrainConfig
    from qtsearch.training.trainer import train

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny_model")
    config = TrainConfig(
        corpus=[str(_shared() / b) for b in TINY_BOOKS],
        out=str(out),
        encoder="uni",
        hidden=64,
        word_dim=32,
        vocab_size=5000,
        batch_size=100,
        max_steps=60,
        split_sentences=True,
        val_every=30,
        checkpoint_every=60,
        lr=5e-3,
    )
    train(config)
    return out


@pytest.fixture(scope="session")
def emma_lines(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """900 sentences of Emma, one a line (lines mode: tokenising stays cheap)."""
    import itertools

    from qtsearch.text.reader import read_sentences

    path = tmp_path_factory.mktemp("emma_lines") / "emma.txt"
    sentences = read_sentences([_shared() / "gutenberg/0003-austen-jane--emma.txt.gz"],
                               split=True)
    path.write_text("\n".join(" ".join(s.text.split())
                              for s in itertools.islice(sentences, 900)) + "\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def mc_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small MC-QT model (bi-GRUs over frozen GloVe ⊕ trainable words), the architecture of
    the previous shipped model: the fused and stepped inference paths read its GRUs."""
    import torch

    from qtsearch.training.configs import TrainConfig
    from qtsearch.training.trainer import train

    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("mc_model")
    config = TrainConfig(
        corpus=[str(_shared() / b) for b in TINY_BOOKS], out=str(out), encoder="mc",
        hidden=32, word_dim=32, vocab_size=5000, batch_size=100, max_steps=20,
        split_sentences=True, val_every=20, checkpoint_every=20, lr=5e-3,
    )
    train(config)
    return out


@pytest.fixture(scope="session")
def flat(tmp_path_factory: pytest.TempPathFactory, shared_data: Path, tiny_model: Path) -> Path:
    """A flat index over real Austen sentences, built with `tiny_model` (tests/query_fixtures)."""
    from query_fixtures import small_index

    return small_index(tmp_path_factory, shared_data, tiny_model, "flat")


@pytest.fixture(scope="session")
def api(flat: Path):
    """The flat index opened once through the Python API."""
    from qtsearch.search.searcher import Searcher

    with Searcher.open(flat) as idx:
        yield idx


#: The sentences of `shipped_index`: every subject with every doing (a grid where an analogy's
#: answer is clear: "The cat slept" : "The cat sang" :: "A farmer slept" : "A farmer sang").
GRID_SUBJECTS = ["The cat", "A farmer", "My sister", "The old sailor"]
GRID_DOINGS = ["slept by the warm fire", "walked to the market in the rain",
               "sang an old song", "cooked a pot of soup", "planted roses in the garden"]
GRID_SENTENCES = [f"{s} {d}." for s in GRID_SUBJECTS for d in GRID_DOINGS]


@pytest.fixture(scope="session")
def shipped_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flat index of GRID_SENTENCES built with the shipped default model through
    `qtsearch.Index.build` (a few seconds). Shared: tests only read it (copy it to write)."""
    import qtsearch

    folder = tmp_path_factory.mktemp("shipped_index") / "grid"
    qtsearch.Index.build(GRID_SENTENCES, folder, index="flat").close()
    return folder
