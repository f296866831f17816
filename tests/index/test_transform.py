"""Vectors fitted to the index (qtsearch.index.transform): the fitted transform is applied the same
way at build time, on `add`, in derived builds and to queries; indexes without one still open."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import wikitext_slice

from qtsearch.core.errors import Interrupted, UnusableIndex, UsageError
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import open_faiss_index, read_manifest
from qtsearch.index.choose import DEFAULT_FIT, SQ8_MAX
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import (
    TRANSFORM_FILE,
    TRANSFORM_JSON,
    VectorTransform,
    auto_fit,
    canonical_fit,
    parse_fit,
)
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.derive import build_from_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    return wikitext_slice(shared_data, tmp_path_factory, 120_000)


def _build(corpus, model, out, index="flat", **options):
    """Built in fp32, the precision its vectors are compared with (under `auto` a CPU with
    AVX512-BF16 embeds in bf16: up to 0.02 apart after a transform)."""
    options.setdefault("precision", "fp32")
    return build_index(IndexConfig(corpus=[str(corpus)], model=str(model), out=str(out),
                                   index=index, split_sentences=True, shard_size=300,
                                   **options))


@pytest.fixture(scope="module")
def built(corpus, tiny_model, tmp_path_factory):
    """A flat index with the default fit."""
    return _build(corpus, tiny_model, tmp_path_factory.mktemp("fitted") / "wiki")


def _stored(folder, ids):
    index = open_faiss_index(folder / "index.faiss")
    return np.stack([index.reconstruct(int(i)) for i in ids])


def _texts(folder, ids):
    with MetadataStore.open(folder / "meta.sqlite") as store:
        rows = store.get(ids)
    return [rows[i]["text"] for i in ids]


# -- the transform itself ----------------------------------------------------------------------

def test_kinds_fit_apply_and_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 32)).astype(np.float32) * np.linspace(5, 0.1, 32) + 3.0
    assert VectorTransform.fit(x, "none") is None
    for spec, out_dim in (("centre", 32), ("abtt:3", 32), ("whiten:8", 8)):
        t = VectorTransform.fit(x, spec)
        y = t.apply(x)
        assert y.shape == (400, out_dim) and y.dtype == np.float32
        assert np.allclose(np.linalg.norm(y, axis=1), 1.0, atol=1e-5)
        assert (t.in_dim, t.out_dim, t.spec) == (32, out_dim, spec)
        t.save(tmp_path)
        back = VectorTransform.load(tmp_path)
        assert back.describe() == t.describe() and np.array_equal(back.apply(x), y)
    # whitening: the centred sample has identity covariance in the kept directions
    t = VectorTransform.fit(x, "whiten:8")
    z = (x - t.mean) @ t.matrix
    assert np.allclose(np.cov(z.T), np.eye(8), atol=1e-3)
    # abtt: what is left has no component along the removed directions
    t = VectorTransform.fit(x, "abtt:3")
    assert np.abs(t.apply(x) @ t.matrix.T).max() < 1e-4


def test_whitening_is_capped_at_half_the_sample():
    x = np.random.default_rng(1).normal(size=(40, 32)).astype(np.float32)
    assert VectorTransform.fit(x, "whiten:30").out_dim == 20


def test_bad_specs_and_broken_files(tmp_path):
    assert parse_fit("whiten:256") == ("whiten", 256) and canonical_fit("Center") == "centre"
    assert canonical_fit("AUTO") == "auto" and auto_fit(SQ8_MAX - 1) == "whiten:768"
    assert auto_fit(SQ8_MAX) == "centre"  # where `--index auto` builds a graph
    for bad in ("whiten", "abtt:0", "abtt:x", "centre:3", "pca:3", ""):
        with pytest.raises(UsageError):
            parse_fit(bad)
    assert VectorTransform.load(tmp_path) is None  # an index without one
    (tmp_path / TRANSFORM_JSON).write_text("{}", encoding="utf-8")
    with pytest.raises(UnusableIndex):
        VectorTransform.load(tmp_path)


# -- through the build, add, derived builds and queries ------------------------------------------

def test_build_stores_transformed_vectors_and_the_query_matches(built, tiny_model):
    folder = built.path
    m = read_manifest(folder)
    t = VectorTransform.load(folder)
    assert DEFAULT_FIT == "auto"
    kind, k = parse_fit(auto_fit(m["count"]))
    assert m["transform"] == t.describe() and t.kind == kind
    assert t.out_dim == (min(k, t.in_dim) if kind == "whiten" else t.in_dim)
    assert m["dim"] == t.out_dim and m["model_dim"] == m["model"]["dim"] == t.in_dim
    with MetadataStore.open(folder / "meta.sqlite") as store:  # sentences, not headings
        rows = store.get(range(m["count"]))
    ids = [i for i in sorted(rows) if len(rows[i]["text"].split()) >= 8][::97][:5]
    texts = _texts(folder, ids)
    stored = _stored(folder, ids)
    encoder = load_encoder(tiny_model, device="cpu", precision="fp32")
    expected = t.apply(encoder.encode(texts, normalize=True))
    np.testing.assert_allclose(stored, expected, atol=1e-3)
    with Searcher.open(folder, device="cpu") as index:
        query = index.embed(texts)
        np.testing.assert_allclose(query, stored, atol=1e-3)
        assert np.all(np.einsum("ij,ij->i", query, stored) > 0.9999)


def test_auto_fit_is_the_same_for_every_index_type_of_a_corpus(built, corpus, tiny_model,
                                                                 tmp_path):
    """So an approximate index answers in the same vector space as the exact one."""
    result = _build(corpus, tiny_model, tmp_path / "hnsw", index="hnsw")
    assert result.manifest["transform"] == built.manifest["transform"]
    assert json.loads((result.path / "config.json").read_text())["fit"] == "auto"
    for name in (TRANSFORM_FILE, TRANSFORM_JSON):
        assert (result.path / name).read_bytes() == (built.path / name).read_bytes()


def test_add_applies_the_same_transform(built, tiny_model, tmp_path):
    folder = tmp_path / "wiki"
    shutil.copytree(built.path, folder)
    more = tmp_path / "more.txt"
    more.write_text("The ship sailed into the harbour at dawn.\n", encoding="utf-8")
    result = add_to_index(folder, [str(more)], device="cpu")
    t = VectorTransform.load(folder)
    encoder = load_encoder(tiny_model, device="cpu")
    expected = t.apply(encoder.encode(["The ship sailed into the harbour at dawn."],
                                      normalize=True))
    np.testing.assert_allclose(_stored(folder, [result.count - 1]), expected, atol=1e-3)
    assert (folder / TRANSFORM_FILE).read_bytes() == (built.path / TRANSFORM_FILE).read_bytes()


def test_derived_build_reuses_the_source_transform(built, tmp_path):
    result = build_from_index(built.path, tmp_path / "sq8", "sq8")
    for name in (TRANSFORM_FILE, TRANSFORM_JSON):
        assert (result.path / name).read_bytes() == (built.path / name).read_bytes()
    assert result.manifest["transform"] == read_manifest(built.path)["transform"]


def test_changing_fit_on_a_rerun_keeps_the_embedded_shards(corpus, tiny_model, tmp_path,
                                                           monkeypatch):
    """Interrupted in the index stage, then rerun with another --fit: only the fit and the
    index are redone, and the result is the one a fresh build with that --fit makes."""
    from qtsearch.indexing.index_stage import IndexStage

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(IndexStage, "run", stop)
    with pytest.raises(Interrupted):
        _build(corpus, tiny_model, tmp_path / "a", fit="centre")
    monkeypatch.undo()
    result = _build(corpus, tiny_model, tmp_path / "a", fit="abtt:2")
    assert "read" in result.resumed and any("embedded" in r for r in result.resumed)
    fresh = _build(corpus, tiny_model, tmp_path / "b", fit="abtt:2")
    assert result.manifest["transform"]["spec"] == "abtt:2"
    assert np.array_equal(_stored(result.path, range(50)), _stored(fresh.path, range(50)))


def test_an_index_from_before_transforms_and_lexical_files_still_opens(corpus, tiny_model,
                                                                    tmp_path):
    """No transform files, no transform/model_dim/fts/files keys, no BM25 files: it opens and
    its vectors are the encoder's own."""
    folder = _build(corpus, tiny_model, tmp_path / "old", fit="none").path
    assert not (folder / TRANSFORM_FILE).exists()
    manifest = json.loads((folder / "manifest.json").read_text())
    for key in ("transform", "model_dim", "fts", "files"):
        manifest.pop(key, None)
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    shutil.rmtree(folder / "bm25")
    i = 40
    text = _texts(folder, [i])[0]
    assert len(text.split()) >= 8
    with Searcher.open(folder, device="cpu") as index:
        assert index.transform is None
        np.testing.assert_allclose(index.embed([text]), _stored(folder, [i]), atol=1e-4)
        hits = index.search([text], k=1, mode="semantic")[0]
        assert hits[0].id == i
