"""Analogy retrieval and its metrics: for A:B::C:?, rank the pool by cosine to v(C)+v(B)−v(A).

Exact inner-product search over the unit-normalised pool. The rank of the answer D is
1 + the number of other candidates scoring at least as high as D: ties count against the answer,
so an encoder that cannot tell sentences apart (equal vectors) scores 0, never 1.
"Excluding" leaves A, B and C out of the candidates (the usual analogy protocol); "including"
keeps them, which exposes the failure the paper's Table 7 shows: retrieving C itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

MODES = ("excluding", "including")


@dataclass
class Ranks:
    """Per question: the answer's rank and the top-1 retrieved pool index, in both modes."""

    excluding: np.ndarray
    including: np.ndarray
    top_excluding: np.ndarray
    top_including: np.ndarray


def rank_answers(
    pool: np.ndarray, abcd: np.ndarray, batch_size: int = 256
) -> Ranks:
    """Ranks of d for the questions a:b::c:? given as rows (a, b, c, d) of pool indexes.

    `pool` must be unit-normalised float32 [n, dim]; a, b, c, d of one question are distinct.
    """
    n_q = len(abcd)
    ranks = {m: np.empty(n_q, dtype=np.int64) for m in MODES}
    tops = {m: np.empty(n_q, dtype=np.int64) for m in MODES}
    for s in range(0, n_q, batch_size):
        q = abcd[s : s + batch_size]
        a, b, c, d = q.T
        scores = (pool[c] + pool[b] - pool[a]) @ pool.T  # [batch, n]
        rows = np.arange(len(q))
        gold = scores[rows, d]
        scores[rows, d] = -np.inf  # D is not its own competitor
        at_least = scores >= gold[:, None]
        ranks["including"][s : s + len(q)] = 1 + at_least.sum(axis=1)
        own = at_least[rows, a].astype(np.int64) + at_least[rows, b] + at_least[rows, c]
        ranks["excluding"][s : s + len(q)] = ranks["including"][s : s + len(q)] - own
        scores[rows, d] = gold
        tops["including"][s : s + len(q)] = scores.argmax(axis=1)
        for x in (a, b, c):
            scores[rows, x] = -np.inf
        tops["excluding"][s : s + len(q)] = scores.argmax(axis=1)
    return Ranks(ranks["excluding"], ranks["including"], tops["excluding"], tops["including"])


def summarise(ranks: np.ndarray) -> dict[str, float]:
    """top1, top5 and MRR of a set of ranks."""
    if len(ranks) == 0:
        return {"top1": 0.0, "top5": 0.0, "mrr": 0.0}
    return {
        "top1": float(np.mean(ranks == 1)),
        "top5": float(np.mean(ranks <= 5)),
        "mrr": float(np.mean(1.0 / ranks)),
    }


def scores_by_group(ranks: Ranks, groups: Iterable[str], c: np.ndarray) -> dict[str, dict]:
    """{group: {"questions": n, "excluding": {top1, top5, mrr}, "including": {…, retrieves_c}}}.

    `retrieves_c`: share of questions whose nearest sentence, queries included, is C itself
    (the paper's Table 7 failure). `c` holds each question's C as a pool index.
    """
    labels = np.array(list(groups))
    out = {}
    for g in sorted(set(labels.tolist())):
        mask = labels == g
        row = {"questions": int(mask.sum()),
               **{m: summarise(getattr(ranks, m)[mask]) for m in MODES}}
        row["including"]["retrieves_c"] = float(np.mean(ranks.top_including[mask] == c[mask]))
        out[g] = row
    return out
