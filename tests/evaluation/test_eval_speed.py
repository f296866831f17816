"""The fast evaluation path (issue 20): sentence vectors cached on disk per model fingerprint, and
the lean L-BFGS probes agreeing with scikit-learn's on real data."""

from __future__ import annotations

import numpy as np
import pytest

from qtsearch.encoders.baselines import GloveBow
from qtsearch.evaluation import classifier
from qtsearch.evaluation.harness import EvalConfig, evaluate, load_tasks
from qtsearch.evaluation.vector_cache import VectorStore


class Counting:
    """A real encoder that counts the sentences it is asked to encode."""

    def __init__(self, inner: GloveBow, fingerprint: str | None = None):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.fingerprint = fingerprint or inner.fingerprint
        self.encoded = 0

    def encode(self, sentences, batch_size=512, normalize=False, progress=None):
        self.encoded += len(sentences)
        return self.inner.encode(sentences, batch_size=batch_size, progress=progress)


@pytest.fixture()
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path))
    return tmp_path


def test_second_run_reads_vectors_from_disk_and_a_new_model_misses(shared_data, cache_root):
    config = EvalConfig(tasks=["SICK-E", "SICK-R", "STS16"], data_dir=str(shared_data), limit=60)
    glove = GloveBow()
    first = Counting(glove)
    run1 = evaluate([first], config)
    assert first.encoded > 0 and run1.encoders[0].vectors["SICK-E"] == "encoded"
    assert run1.encoders[0].vectors["SICK-R"] == "memory"  # same sentences, encoded once
    second = Counting(glove)
    run2 = evaluate([second], config)
    assert second.encoded == 0
    assert set(run2.encoders[0].vectors.values()) <= {"disk", "memory"}
    assert run2.encoders[0].results == run1.encoders[0].results
    other = Counting(glove, fingerprint="another-model")  # a changed model: its own vectors
    evaluate([other], config)
    assert other.encoded == first.encoded
    assert len(list((cache_root / "eval").iterdir())) == 2
    off = Counting(glove)
    evaluate([off], EvalConfig(**{**config.__dict__, "cache": False}))
    assert off.encoded == first.encoded


def test_store_rejects_a_file_of_the_wrong_length(tmp_path):
    store = VectorStore(tmp_path)
    store.save(["a b", "c d"], np.ones((2, 3)))
    assert store.load(["a b", "c d"]).shape == (2, 3)
    assert store.load(["a b"]) is None  # other texts, other file
    np.save(store.path(["x"]), np.ones((2, 3)))
    assert store.load(["x"]) is None


@pytest.mark.slow
def test_lbfgs_probe_matches_sklearn_on_real_tasks(shared_data):
    """MR (10-fold CV, 4,000 sentences) and SICK-R (score distributions) with GloVe vectors:
    our solver and scikit-learn's reach the same figures within tolerance."""
    tasks = {t.name: t for t in load_tasks(EvalConfig(tasks=["MR", "SICK-R"],
                                                      data_dir=str(shared_data), limit=4000))}
    glove = GloveBow()
    mr = tasks["MR"]
    X = glove.encode(mr.data.texts)
    ours = classifier.kfold_accuracy(X, mr.data.labels, 10, 0, solver="lbfgs")[0]
    ref = classifier.kfold_accuracy(X, mr.data.labels, 10, 0, solver="sklearn")[0]
    assert ours > 60 and abs(ours - ref) <= 0.5
    sick = tasks["SICK-R"]
    feats = [np.concatenate([np.abs(u - v), u * v], axis=1)
             for u, v in ((glove.encode(p.a), glove.encode(p.b)) for p in sick.splits)]
    r = {}
    for solver in ("lbfgs", "sklearn"):
        probe = classifier.distribution_regression(feats[0], sick.splits[0].y, 1, 5,
                                                   dev=(feats[1], sick.splits[1].y),
                                                   solver=solver)
        r[solver] = np.corrcoef(probe.expected(feats[2]), sick.splits[2].y)[0, 1]
    assert r["lbfgs"] > 0.5 and abs(r["lbfgs"] - r["sklearn"]) <= 0.005
