"""Fusing the semantic and lexical legs into one ranking.

Two methods, measured on paraphrase retrieval (docs/searching.md, "Hybrid search"):
- `convex`: over the union of both legs' candidates, each leg's scores are z-normalised and
  mixed as weight · lexical + (1 − weight) · semantic. A candidate missing from one leg gets that
  leg's true score where it is known (the query's cosine with the stored vector), else the
  lowest score the leg returned (0 for BM25 when the leg returned all its matches).
- `rrf`: reciprocal-rank fusion, Σ 1 / (k + rank) over the legs (k = 60).

The weight depends on what the index holds (`settings_for`): sentences or passages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from qtsearch.core.errors import UsageError

FUSIONS = ("convex", "rrf")
#: Candidates each leg contributes to the fusion.
CANDIDATES = 50
LEXICAL_WEIGHT = 0.6
RRF_K = 60
#: Over passages (an index whose rows average PASSAGE_TERMS BM25 terms or more: abstracts,
#: articles, records) the words decide more than a mean of word vectors can, which blurs over
#: a long text: BM25's weight there, and pseudo-relevance feedback for the semantic leg (the
#: query vector plus FEEDBACK times the mean vector of the lexical leg's first FEEDBACK_HITS
#: hits). Chosen with `qtsearch bench retrieval` on SciFact train and NFCorpus dev
#: (docs/retrieval.md). An index of sentences (SENTENCE_TERMS or fewer) keeps the model's own
#: weight, chosen on paraphrase retrieval, and no feedback; between the two, both move
#: linearly with the mean length.
PASSAGE_LEXICAL_WEIGHT = 0.7
FEEDBACK = 2.0
FEEDBACK_HITS = 3
SENTENCE_TERMS, PASSAGE_TERMS = 20.0, 60.0


@dataclass(frozen=True)
class FusionSettings:
    """How one index fuses its legs: BM25's weight and the semantic leg's feedback."""

    lexical_weight: float
    feedback: float = 0.0


def settings_for(model_weight: float, mean_terms: float | None) -> FusionSettings:
    """The fusion of an index whose rows hold `mean_terms` BM25 terms on average (None: not
    known, as for an index without BM25 files: treated as sentences), for a model whose own
    BM25 weight (chosen on sentences) is `model_weight`."""
    span = PASSAGE_TERMS - SENTENCE_TERMS
    share = 0.0 if mean_terms is None else min(1.0, max(0.0, (mean_terms - SENTENCE_TERMS) / span))
    return FusionSettings(model_weight + share * (PASSAGE_LEXICAL_WEIGHT - model_weight),
                          share * FEEDBACK)


def feedback(q: np.ndarray, stored: np.ndarray, weight: float) -> np.ndarray:
    """The query vector moved towards the mean of `stored` (the first lexical hits' vectors),
    unit length again."""
    moved = q + weight * stored.mean(axis=0)
    return (moved / max(float(np.linalg.norm(moved)), 1e-12)).astype(np.float32)

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


def fuse(method: str, semantic: Leg, lexical: Leg, lexical_complete: bool,
         cosine_of: Callable[[list[int]], np.ndarray | None],
         weight: float) -> tuple[Leg, dict[str, Leg]]:
    """Both legs fused by `method` (one of FUSIONS): the fused ranking and the per-leg scores
    shown with each hit."""
    if method == "rrf":
        return rrf({"semantic": semantic, "lexical": lexical}), {
            "semantic": semantic, "lexical": lexical}
    if method != "convex":
        raise UsageError(f"unknown fusion {method!r}; choose from {', '.join(FUSIONS)}")
    fused, sem, lex = convex(semantic, lexical, lexical_complete, cosine_of, weight)
    return fused, {"semantic": sem, "lexical": lex}


def with_feedback(vectors: np.ndarray, legs: list[Leg],
                  reconstruct: Callable[[np.ndarray], np.ndarray | None],
                  weight: float) -> np.ndarray:
    """Each query vector moved towards its lexical leg's first FEEDBACK_HITS hits (`feedback`);
    unchanged where the leg found nothing or the index cannot give stored vectors."""
    moved = vectors.copy()
    for row, leg in enumerate(legs):
        top = np.asarray(list(leg)[:FEEDBACK_HITS], dtype=np.int64)
        stored = reconstruct(top) if len(top) else None
        if stored is not None:
            moved[row] = feedback(vectors[row], stored, weight)
    return moved
