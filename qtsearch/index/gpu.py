"""The GPU side of indexing and search, done with torch on top of faiss-cpu.

Why torch and not faiss-gpu: faiss-gpu on PyPI is built for CUDA 12 and pulls CUDA 12's own runtime
wheels (hundreds of MB), while current torch builds bring CUDA 13; torch is already on every machine
that runs qtsearch, with whatever CUDA it was built for. The two steps where a GPU pays are dense
inner products: k-means/assignment of an IVF coarse quantizer (O(n · nlist · d)) and exact search of
a flat index (O(nq · n · d)). Both are a matmul plus an argmax/top-k, which torch does at the GPU's
matmul or memory-bandwidth limit. Everything else (scalar-quantizer and PQ encoding, HNSW graphs,
the index file) stays in faiss-cpu, so the saved index is always a CPU index.

The functions take a torch device, so the same code runs (and is tested) on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Rows of the database scored per matmul: bounds the score matrix to nq x CHUNK.
CHUNK = 1 << 18


def spherical_kmeans(x: np.ndarray, k: int, device: torch.device, niter: int = 20,
                     seed: int = 0) -> np.ndarray:
    """k unit-norm centroids of unit-norm rows `x` [n, d], assigned by inner product: the rule
    of an inner-product IVF quantizer, so lists are what faiss would probe."""
    n = x.shape[0]
    if n < k:
        raise ValueError(f"k-means needs at least k={k} training vectors, got {n}")
    gen = torch.Generator().manual_seed(seed)
    data = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(device)
    centroids = data[torch.randperm(n, generator=gen)[:k].to(device)].clone()
    for _ in range(niter):
        labels = assign(data, centroids)
        sums = torch.zeros_like(centroids).index_add_(0, labels, data)
        counts = torch.bincount(labels, minlength=k)
        empty = (counts == 0).nonzero().flatten()
        if len(empty):  # re-seed empty lists from random points, as faiss splits big ones
            pick = torch.randint(0, n, (len(empty),), generator=gen).to(device)
            sums[empty] = data[pick]
        centroids = torch.nn.functional.normalize(sums, dim=1)
    return centroids.cpu().numpy()


def assign(data: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Index of the highest-inner-product centroid of each row, computed in chunks."""
    return torch.cat([(data[i:i + CHUNK] @ centroids.T).argmax(dim=1)
                      for i in range(0, data.shape[0], CHUNK)])


def assign_numpy(x: np.ndarray, centroids: torch.Tensor) -> np.ndarray:
    """`assign` for a numpy batch, returned as the int64 list numbers faiss add_core takes."""
    data = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(centroids.device)
    return assign(data, centroids).cpu().numpy().astype(np.int64)


def _scores(q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """q @ x.T in fp32. fp16 inputs are multiplied with fp32 output where torch can (CUDA
    `mm(out_dtype=)`): fp16 *scores* would be rounded to ~5e-4, coarser than the gaps between
    a query's neighbours under a model whose vectors all have cosine ~0.9 to each other."""
    if q.dtype == torch.float32:
        return q @ x.T
    try:
        return torch.mm(q, x.T, out_dtype=torch.float32)
    except (TypeError, RuntimeError):  # torch without fp32-output fp16 matmul
        return (q.float() @ x.float().T)


class FlatSearch:
    """Exact inner-product search over a copy of a flat index's vectors on a torch device.

    On CUDA the vectors are held in fp16 (half the memory and bandwidth of fp32; score errors
    ~1e-5 on unit vectors, far below the gaps between neighbours) and products accumulate in
    fp32. Results match faiss IndexFlatIP.search: scores [nq, k] float32, ids [nq, k] int64.
    """

    def __init__(self, vectors: np.ndarray, device: torch.device):
        self.device = device
        self.dtype = torch.float16 if device.type == "cuda" else torch.float32
        n, self.dim = vectors.shape
        self.data = torch.empty((n, self.dim), dtype=self.dtype, device=device)
        for i in range(0, n, CHUNK):  # upload in pieces: no second full copy in host memory
            piece = np.ascontiguousarray(vectors[i:i + CHUNK], dtype=np.float32)
            self.data[i:i + len(piece)] = torch.from_numpy(piece).to(device, self.dtype)

    @property
    def ntotal(self) -> int:
        return int(self.data.shape[0])

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.ntotal)
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(
            self.device, self.dtype)
        best_s = best_i = None
        for start in range(0, self.ntotal, CHUNK):
            scores = _scores(q, self.data[start:start + CHUNK])
            s, i = scores.topk(min(k, scores.shape[1]), dim=1)
            i = i + start
            if best_s is not None:
                merged = torch.cat([best_s, s], 1)
                s, pos = merged.topk(min(k, merged.shape[1]), dim=1)
                i = torch.cat([best_i, i], 1).gather(1, pos)
            best_s, best_i = s, i
        assert best_s is not None and best_i is not None
        return best_s.cpu().numpy(), best_i.cpu().numpy().astype(np.int64)


class GpuFlatBackend:
    """A flat index searched by `FlatSearch` on a GPU; everything but the search itself
    (parameters, stored vectors, warm-up) is the CPU backend's it was made from."""

    def __init__(self, base: Any, vectors: np.ndarray, device: torch.device):
        self.base = base
        self.flat = FlatSearch(vectors, device)

    def __getattr__(self, name: str) -> Any:  # d, ntotal, params, reconstruct, warm-up
        return getattr(self.base, name)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.flat.search(queries, k)
