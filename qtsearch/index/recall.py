"""How well an approximate index recalls exact search, and the search parameters that reach a
target: the build tunes nprobe / efSearch with these, and the benchmarks report the same
measure.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import faiss
import numpy as np

from qtsearch.core.blas import ONE_BLAS_THREAD
from qtsearch.core.device import cpus
from qtsearch.index.faiss_backend import apply_search_params, search_rows
from qtsearch.index.fold import Fold

#: Exact neighbours fetched beyond k, so that sentences tied with the k-th (a repeated
#: sentence; with a mean-of-words model any two sentences of the same words) are known.
TIE_EXTRA = 20
#: Scores within this of the k-th exact score are ties (fp32 sums in another order differ in
#: the 7th digit).
TIE_TOL = 1e-5


@dataclass
class Truth:
    """The exact neighbours of tuning queries: ids and scores (inner product), best first, k
    plus TIE_EXTRA of them; `k` is the recall's."""

    ids: np.ndarray
    scores: np.ndarray
    k: int

    def head(self, n: int) -> Truth:
        """The first `n` queries' neighbours."""
        return Truth(self.ids[:n], self.scores[:n], self.k)


#: Corpus rows scored against all queries at a time (500 queries x 50k rows: 100 MB).
EXACT_CHUNK = 50_000
#: Columns of a query's first chunk whose (k + TIE_EXTRA)-th best score bounds the rest from
#: below before any neighbour is known: a partial sort of a few, not of all 50k.
SEED_COLUMNS = 1024


def exact_neighbours(queries: np.ndarray, batches: Iterable[np.ndarray], k: int) -> Truth:
    """Exact top-k neighbours (inner product) of `queries` over vectors streamed batch by
    batch, so the ground truth for tuning needs memory for one batch, not for the whole corpus;
    TIE_EXTRA more are kept to recognise ties with the k-th. Of equal scores the earlier row
    comes first.

    One BLAS matmul per chunk; of its scores only those at least a query's (k + TIE_EXTRA)-th
    best so far can enter, found by one comparison and sorted with the best (a few thousand
    of a chunk's 50k x 500): a partial sort of every score took as long again as the
    matmuls (500 queries over 1M vectors: 9.0-10.0 CPU-s, now 4.2; docs/speed.md). Each
    core takes a share of the queries on a thread of its own (numpy multiplies and compares
    without the GIL), BLAS held to one thread meanwhile. A query's row is scored as alone, so
    the neighbours are the same whatever the share."""
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    nq, kk = queries.shape[0], k + TIE_EXTRA
    shares = [rows for rows in np.array_split(np.arange(nq), min(cpus(), nq)) if len(rows)]
    best = [(np.full((len(rows), kk), -np.inf, dtype=np.float32),
             np.full((len(rows), kk), -1, dtype=np.int64)) for rows in shares]

    def merge(share: int, chunk: np.ndarray, offset: int) -> None:
        rows = shares[share]
        scores = queries[rows[0] : rows[-1] + 1] @ chunk.T
        best_d, best_i = best[share]
        floor = best_d[:, -1:]
        if offset == 0 and scores.shape[1] >= kk:  # nothing known yet: a bound from a few
            seed = scores[:, :SEED_COLUMNS]
            floor = np.partition(seed, seed.shape[1] - kk, axis=1)[:, -kk:][:, :1]
        row, col = np.nonzero(scores >= floor)
        d = np.concatenate([best_d.reshape(-1), scores[row, col]])
        r = np.concatenate([np.repeat(np.arange(len(rows)), kk), row])
        i = np.concatenate([best_i.reshape(-1), col + offset])
        order = np.lexsort((-d, r))  # stable: the best so far, then the chunk's in row order
        first = np.searchsorted(r[order], np.arange(len(rows)))
        pick = order[(first[:, None] + np.arange(kk)).reshape(-1)]
        best[share] = (d[pick].reshape(-1, kk), i[pick].reshape(-1, kk))

    offset = 0
    with ThreadPoolExecutor(len(shares)) as pool, ONE_BLAS_THREAD:
        for batch in batches:
            for lo in range(0, batch.shape[0], EXACT_CHUNK):
                chunk = np.asarray(batch[lo:lo + EXACT_CHUNK], dtype=np.float32)
                list(pool.map(merge, range(len(shares)), [chunk] * len(shares),
                              [offset] * len(shares)))
                offset += chunk.shape[0]
    return Truth(np.concatenate([i for _, i in best]), np.concatenate([d for d, _ in best]), k)


def recall_at_k(found: np.ndarray, truth: np.ndarray | Truth,
                fold: Fold | None = None) -> float:
    """Mean fraction of the true top-k found in the returned top-k. With a `Truth`, a returned
    id tied with the k-th exact neighbour counts as found: which of several equal vectors make
    the top k is arbitrary, and counting them as misses made the build tune for a recall that
    ties alone kept out of reach (docs/indexing.md, "Indexing", after "Choosing the index").
    With the `fold` of a graph, a returned row counts when its node (its vector) is one of the
    accepted ones: a node repeated more often than the exact search listed is still the same
    vector."""
    if not isinstance(truth, Truth):
        hits = sum(len(set(f[f >= 0].tolist()) & set(t[t >= 0].tolist()))
                   for f, t in zip(found, truth, strict=True))
        return hits / max(1, int((truth >= 0).sum()))
    k, hits, total = truth.k, 0, 0
    for f, ids, scores in zip(found, truth.ids, truth.scores, strict=True):
        real = ids[:k] >= 0
        n = int(real.sum())
        if n == 0:
            continue
        kth = scores[:k][real][-1]  # scores are sorted: the top k are all within the tie bound
        accept = ids[(scores >= kth - TIE_TOL) & (ids >= 0)]
        f = f[f >= 0]
        if fold is not None:
            hits += min(n, int(np.isin(fold.node_of_row[f], fold.node_of_row[accept]).sum()))
        else:
            hits += min(n, len(set(f.tolist()) & set(accept.tolist())))
        total += n
    return hits / max(1, total)


def measure_recall(index: faiss.Index, params: dict[str, Any], queries: np.ndarray,
                   truth: Truth, fold: Fold | None = None) -> float:
    """Recall@k of `index` (rows folded onto its nodes by `fold`) searched with `params`
    against the exact neighbours `truth`."""
    apply_search_params(index, params)
    _, found = search_rows(index, fold, queries, truth.k)
    return recall_at_k(found, truth, fold)


def tune_search(
    index: faiss.Index,
    name: str,
    candidates: list[int],
    queries: np.ndarray,
    truth: Truth,
    target: float,
    outer: str | None = None,
    outer_candidates: list[int] | None = None,
    fold: Fold | None = None,
) -> tuple[dict[str, Any], float]:
    """The cheapest search parameters reaching `target` recall@k (else the most accurate).

    For each value of the outer parameter (smallest first; e.g. the refine shortlist factor),
    try `name` (e.g. nprobe) from its smallest candidate up and stop at the first that reaches
    the target: recall grows with both, so the first outer value that can reach it wins. Going
    up rather than bisecting from the largest keeps tuning cheap: a search costs about its
    parameter, so with candidates growing geometrically the whole walk costs a small multiple
    of the answer, where bisection began with the dearest value (nprobe 1024 scans the whole
    corpus once per tuning query: 10+ s at 1M on 2 cores).
    """
    best: tuple[dict[str, Any], float] = ({}, -1.0)
    for o in (outer_candidates or [None]):
        fixed = {} if o is None or outer is None else {outer: o}
        for value in candidates:
            r = measure_recall(index, {**fixed, name: value}, queries, truth, fold)
            if r > best[1]:
                best = ({**fixed, name: value}, r)
            if r >= target:
                return {**fixed, name: value}, r
    return best
