"""The torch GPU path of indexing and search (qtsearch/index/gpu.py).

The same torch code runs on any device, so its logic is tested here on the CPU against faiss on
real vectors; the tests marked `cuda` repeat the checks on a GPU and skip cleanly without one.
"""

from __future__ import annotations

import faiss
import numpy as np
import pytest
import torch

from qtsearch.index import open_faiss_index
from qtsearch.index.faiss_backend import FaissBuilder, flat_vectors
from qtsearch.index.gpu import FlatSearch, GpuFlatBackend, assign_numpy, spherical_kmeans
from qtsearch.index.recall import recall_at_k
from qtsearch.search.searcher import Searcher

CPU = torch.device("cpu")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def vectors(flat) -> np.ndarray:
    """The 2,000 normalised sentence vectors of the session's real flat index."""
    index = open_faiss_index(flat / "index.faiss")
    return index.reconstruct_n(0, index.ntotal)


@pytest.fixture(scope="module")
def encoded(flat, tiny_model) -> np.ndarray:
    """The same sentences' vectors as the encoder gives them (the index holds them whitened,
    which removes the clusters an IVF relies on: README, "Fitted vectors")."""
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.index.store import MetadataStore

    with MetadataStore.open(flat / "meta.sqlite") as store:
        rows = store.get(range(store.count()))
    return load_encoder(tiny_model, device="cpu", precision="fp32").encode(
        [rows[i]["text"] for i in sorted(rows)], normalize=True)


def test_flat_vectors_is_the_stored_matrix(flat, vectors):
    index = open_faiss_index(flat / "index.faiss", mmap=True)
    np.testing.assert_array_equal(flat_vectors(index), vectors)
    assert flat_vectors(faiss.index_factory(8, "HNSW8", faiss.METRIC_INNER_PRODUCT)) is None


def test_kmeans_centroids_and_assignment_follow_faiss(vectors):
    centroids = spherical_kmeans(vectors, 16, CPU, niter=10)
    assert centroids.shape == (16, vectors.shape[1])
    np.testing.assert_allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    quantizer = faiss.IndexFlatIP(vectors.shape[1])
    quantizer.add(centroids)
    _, expected = quantizer.search(vectors, 1)
    got = assign_numpy(vectors, torch.from_numpy(centroids))
    assert np.mean(got == expected[:, 0]) > 0.999  # ties aside, the same list for every row
    assert len(np.unique(got)) == 16  # no empty list
    with pytest.raises(ValueError, match="at least k"):
        spherical_kmeans(vectors[:10], 16, CPU)


def test_builder_torch_path_builds_an_ivf_with_good_recall(encoded):
    """FaissBuilder's GPU path (k-means and list assignment in torch), run on the CPU."""
    vectors = encoded
    builder = FaissBuilder("IVF16,Flat", vectors.shape[1])
    builder.gpu = CPU
    builder.train(vectors)
    for start in range(0, len(vectors), 700):  # batches, ids continuing across them
        builder.add(vectors[start:start + 700])
    assert builder.ntotal == len(vectors)
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    _, truth = exact.search(vectors[:300], 10)
    faiss.extract_index_ivf(builder.index).nprobe = 4
    _, found = builder.index.search(vectors[:300], 10)
    assert recall_at_k(found, truth) >= 0.9


def _check_flat_search(vectors: np.ndarray, device: torch.device, min_recall: float,
                       atol: float) -> None:
    """Scores equal exact search's; ids too, but for near-ties (repeated sentences) ordered
    differently by another summation order."""
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    want_s, want_i = exact.search(vectors[:200], 10)
    search = FlatSearch(vectors, device)
    got_s, got_i = search.search(vectors[:200], 10)
    assert got_s.dtype == np.float32 and got_i.dtype == np.int64 and got_i.shape == (200, 10)
    assert recall_at_k(got_i, want_i) >= min_recall
    np.testing.assert_allclose(got_s, want_s, atol=atol)
    assert search.search(vectors[:2], 10_000)[1].shape == (2, len(vectors))  # k > n: all


def test_flat_search_matches_faiss_on_cpu(vectors, monkeypatch):
    _check_flat_search(vectors, CPU, min_recall=0.99, atol=1e-5)
    monkeypatch.setattr("qtsearch.index.gpu.CHUNK", 300)  # results merged across chunks
    _check_flat_search(vectors, CPU, min_recall=0.99, atol=1e-5)


@pytest.mark.cuda
@needs_cuda
def test_flat_search_on_gpu_matches_faiss(vectors):
    _check_flat_search(vectors, torch.device("cuda"), min_recall=0.97, atol=1e-3)  # fp16


@pytest.mark.cuda
@needs_cuda
def test_index_open_on_cuda_searches_on_the_gpu(flat):
    with Searcher.open(flat, device="cuda") as gpu, Searcher.open(flat, device="cpu") as cpu:
        assert isinstance(gpu.backend, GpuFlatBackend)
        assert not isinstance(cpu.backend, GpuFlatBackend)
        query = "She was very fond of her father."
        want = [h.id for h in cpu.search(query, 10)[0]]
        got = [h.id for h in gpu.search(query, 10)[0]]
        assert len(set(want) & set(got)) >= 8  # GPU query encoding differs in the last bits


@pytest.mark.cuda
@needs_cuda
def test_a_numpy_encoder_still_searches_a_flat_index_on_the_gpu(shipped_index):
    """The shipped mean model encodes in numpy on every device; the device asked for decides
    where the vectors are searched."""
    with Searcher.open(shipped_index, device="cuda") as gpu:
        assert gpu.encoder.device.type == "cpu"
        assert isinstance(gpu.backend, GpuFlatBackend)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_without_a_gpu_is_refused_not_searched_on_the_cpu(shipped_index):
    from qtsearch.core.errors import UsageError

    with pytest.raises(UsageError, match="no CUDA GPU"):
        Searcher.open(shipped_index, device="cuda")
    with Searcher.open(shipped_index, device="auto") as auto:
        assert not isinstance(auto.backend, GpuFlatBackend)



def test_one_ahead_keeps_order_and_results():
    """The shard prefetch used beside a GPU yields what the plain loop yields, in order."""
    from qtsearch.indexing.shards import one_ahead as _one_ahead

    items = [3, 1, 2, 5]
    assert list(_one_ahead(lambda i: i * i, items, True)) == [9, 1, 4, 25]
    assert list(_one_ahead(lambda i: i * i, items, False)) == [9, 1, 4, 25]
    assert list(_one_ahead(lambda i: i, [], True)) == []
