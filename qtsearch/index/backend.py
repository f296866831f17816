"""The seam between the query layer and whatever searches the vectors.

The query layer (qtsearch.search) sees a `VectorBackend`: k-nearest search by inner product,
the stored vectors by id, search parameters, and warm-up hooks. `open_backend` picks one for
an index file and a device: faiss-cpu (every index type), or for a flat index on a CUDA device
an exact torch search on the GPU. Nothing outside `qtsearch/index/` imports faiss; a new
backend (hnswlib, say) is one more class here and one more branch in `open_backend`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from qtsearch.index.faiss_backend import FaissBackend, flat_vectors

if TYPE_CHECKING:  # torch: only a search on a GPU imports it (qtsearch.index.gpu)
    import torch

    from qtsearch.core.device import Cpu

log = logging.getLogger("qtsearch")

#: A filtered search scores its subset exhaustively when the subset's vectors fit in this many
#: bytes (exact top-k, a few ms); larger subsets go through the index with over-fetching.
SUBSET_BYTES = 64 << 20


class VectorBackend(Protocol):
    """What a query needs from an index of L2-normalised vectors ranked by inner product."""

    params: dict[str, Any]

    @property
    def d(self) -> int: ...

    @property
    def ntotal(self) -> int: ...

    def set_params(self, params: dict[str, Any]) -> None:
        """Search-time parameters by name (nprobe, efSearch, k_factor_rf)."""

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and ids [nq, k], best first; id -1 pads a row with fewer hits."""
        ...

    def reconstruct(self, ids: np.ndarray) -> np.ndarray | None:
        """The stored vectors of `ids` [n, d], or None where the index keeps none."""
        ...

    def warm_files(self) -> list[Path]:
        """Files to read into the page cache before the first query."""
        ...

    def touch_pages(self) -> None:
        """Fault in memory-mapped pages that a cached file still leaves cold."""


def open_backend(path: Path, device: torch.device | Cpu) -> VectorBackend:
    """The backend for an index file: faiss, or exact torch search of a flat index on a GPU
    (at GPU memory bandwidth, the vectors held in fp16)."""
    base = FaissBackend.open(path)
    if device.type != "cuda":
        return base
    vectors = flat_vectors(base.index)
    if vectors is None:
        log.info("an approximate index is searched on the CPU (GPU search covers flat indexes)")
        return base
    from qtsearch.index.gpu import GpuFlatBackend

    return GpuFlatBackend(base, vectors, device)


def top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best columns of `scores` [nq, n] per row, best first, as (scores, ids[columns])."""
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < scores.shape[1] else \
        np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    best = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-best, axis=1, kind="stable")
    cols = np.take_along_axis(part, order, axis=1)
    return np.take_along_axis(scores, cols, axis=1), ids[cols]


def search_each(backend: VectorBackend, queries: np.ndarray, k: int, ids: np.ndarray | None,
                alone_up_to: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of each query [n, d] (among the stored vectors `ids` only, when given:
    `search_subset`). Up to `alone_up_to` queries are searched each alone, so that a query
    answers the same asked alone or beside others: faiss and BLAS score several queries in
    other kernels than one, with other roundings, and a subset's search widens its fetch for
    all together."""
    if len(queries) > alone_up_to:
        return (backend.search(queries, k) if ids is None
                else search_subset(backend, queries, k, ids))
    found = [backend.search(row, k) if ids is None else search_subset(backend, row, k, ids)
             for row in queries.reshape(len(queries), 1, -1)]
    if len(found) == 1:
        return found[0]
    if not found:
        return np.empty((0, k), np.float32), np.empty((0, k), np.int64)
    return np.concatenate([s for s, _ in found]), np.concatenate([i for _, i in found])


def search_subset(backend: VectorBackend, queries: np.ndarray, k: int,
                  ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-k among the stored vectors `ids` only (sorted, unique): exact over the subset's
    own vectors where they can be read back and are small enough, else searched through the
    index with a k widened until k hits per query pass (exact on a flat index)."""
    if len(ids) == 0:
        return (np.empty((len(queries), 0), np.float32), np.empty((len(queries), 0), np.int64))
    if len(ids) * backend.d * 4 <= SUBSET_BYTES:
        vectors = backend.reconstruct(ids)
        if vectors is not None:
            return top_k(queries @ vectors.T, ids, k)
    n = backend.ntotal
    fetch = min(n, max(4 * k, 2 * k * n // len(ids)))
    while True:
        scores, found = backend.search(queries, fetch)
        keep = np.isin(found, ids) & (found >= 0)
        if fetch >= n or bool((keep.sum(axis=1) >= k).all()):
            break
        fetch = min(n, fetch * 4)
    out_s = np.full((len(queries), k), -np.inf, dtype=np.float32)
    out_i = np.full((len(queries), k), -1, dtype=np.int64)
    for row in range(len(queries)):
        s, i = scores[row][keep[row]][:k], found[row][keep[row]][:k]
        out_s[row, :len(s)], out_i[row, :len(i)] = s, i
    return out_s, out_i
