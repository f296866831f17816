"""Fusing the semantic and lexical legs into one ranking.

Two methods, measured on paraphrase retrieval (docs/searching.md, "Hybrid search"):
- `convex`: over the union of both legs' candidates, each leg's scores are z-normalised and
  mixed as weight · lexical + (1 − weight) · semantic. A candidate missing from one leg gets that
  leg's true score where it is known (the query's cosine with the stored vector), else the
  lowest score the leg returned (0 for BM25 when the leg returned all its matches).
- `rrf`: reciprocal-rank fusion, Σ 1 / (k + rank) over the legs (k = 60).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

FUSIONS = ("convex", "rrf")
#: Candidates each leg contributes to the fusion.
CANDIDATES = 50
LEXICAL_WEIGHT = 0.6
RRF_K = 60

#: id -> score of one leg, best first.
Leg = dict[int, float]


def rrf(legs: Mapping[str, Leg], k: int = RRF_K) -> Leg:
    """Reciprocal-rank fusion of ranked legs: id -> Σ 1 / (k + rank), best first."""
    fused: dict[int, float] = {}
    for leg in legs.values():
        for rank, i in enumerate(leg, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank)
    return dict(sorted(fused.items(), key=lambda kv: -kv[1]))


def _z(values: np.ndarray) -> np.ndarray:
    std = float(values.std())
    return (values - values.mean()) / std if std > 1e-12 else np.zeros_like(values)


def convex(semantic: Leg, lexical: Leg, lexical_complete: bool,
           cosine_of: Callable[[list[int]], np.ndarray | None],
           weight: float = LEXICAL_WEIGHT) -> tuple[Leg, Leg, Leg]:
    """Convex combination of z-normalised scores over the union of both legs.

    `lexical_complete`: the lexical leg returned every row it matches, so any other row's BM25
    is 0. `cosine_of(ids)` gives the query's cosine with stored vectors (None where the index
    cannot say). Returns (fused, semantic scores, lexical scores) over the union, fused best
    first; the leg scores are those shown per hit (filled-in ones included).
    """
    union = list(dict.fromkeys([*semantic, *lexical]))
    if not union:
        return {}, {}, {}
    lex_floor = 0.0 if lexical_complete or not lexical else min(lexical.values())
    lex = {i: lexical.get(i, lex_floor) for i in union}
    missing = [i for i in union if i not in semantic]
    sem = dict(semantic)
    if missing:
        known = cosine_of(missing)
        floor = min(semantic.values()) if semantic else 0.0
        fill = known.tolist() if known is not None else [floor] * len(missing)
        sem.update(zip(missing, fill, strict=True))
    s = _z(np.array([sem[i] for i in union]))
    lx = _z(np.array([lex[i] for i in union]))
    mixed = weight * lx + (1.0 - weight) * s
    order = np.argsort(-mixed, kind="stable")
    fused = {union[j]: float(mixed[j]) for j in order}
    return fused, sem, lex
