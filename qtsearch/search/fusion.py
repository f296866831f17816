"""Fusing the semantic and lexical legs into one ranking.

Two methods, measured on paraphrase retrieval (docs/searching.md, "Hybrid search"):
- `convex`: over the union of both legs' candidates, each leg's scores are z-normalised and
  mixed as weight · lexical + (1 − weight) · semantic. A candidate missing from one leg gets that
  leg's true score where it is known (the query's cosine with the stored vector), else the
  lowest score the leg returned (0 for BM25 when the leg returned all its matches).
- `rrf`: reciprocal-rank fusion, Σ 1 / (k + rank) over the legs (k = 60).

The weight depends on what the index holds (`settings_for`): sentences or passages. Every
setting of a search is one `SearchSettings`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from qtsearch.core.errors import UsageError
from qtsearch.index.bm25 import K1, B

FUSIONS = ("convex", "rrf")
#: The fusion of the hybrid mode, chosen on paraphrase retrieval (docs/searching.md, "Hybrid
#: search: how the legs are fused").
DEFAULT_FUSION = "convex"
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
PASSAGE_LEXICAL_WEIGHT = 0.6
FEEDBACK = 2.0
FEEDBACK_HITS = 3
#: The lexical leg's own feedback over passages (RM3, qtsearch.search.lexical.expanded): the
#: share of the query's weight on the terms of BM25's first hits. Short topic queries gain
#: the words their first abstracts share (docs/retrieval.md, "Lexical feedback over
#: passages"); sentences keep BM25 itself.
LEXICAL_FEEDBACK = 0.3
SENTENCE_TERMS, PASSAGE_TERMS = 20.0, 60.0
#: Word alignment (qtsearch.search.alignment): its share of a re-scored hit's score, and how
#: many of the first stage's hits it re-scores. Chosen on SQuAD's development answers, the
#: paraphrase sets and BEIR's development splits together (docs/retrieval.md, "Word
#: alignment"). Over passages it re-scores more: a passage's mean vector blurs more of what
#: it says, so a relevant one sits deeper in the first stage (semantic search gains with
#: every depth up to 200); 30 keeps a query at 1M sentences within its few milliseconds.
ALIGNMENT = 0.5
ALIGNMENT_DEPTH = 30
PASSAGE_ALIGNMENT_DEPTH = 100


@dataclass(frozen=True)
class SearchSettings:
    """How a search ranks, every setting in one value: an opened index resolves its own once
    (`settings_for`), and one search may take another (`dataclasses.replace` of the index's)
    without changing what any other search, in any thread, sees.

    `fusion`: one of FUSIONS. `lexical_weight`: BM25's weight in the convex fusion, 0 to 1.
    `feedback`: how far the semantic leg's query vector moves towards the lexical leg's first
    hits (0: not at all). `lexical_feedback`: the share of the lexical leg's query weight on
    its own first hits' terms in hybrid search, 0 (BM25 itself) to below 1.
    `candidates`: how many hits each leg offers the fusion.
    `alignment`: word alignment's share of the score of the first `alignment_depth` hits of
    semantic and hybrid search, 0 (off) to below 1, where the model has a word table
    (qtsearch.search.alignment). `k1`, `b`:
    BM25's, as the index's BM25 files were built with them. They are build-time settings: the
    files hold each posting's length-normalised term frequency computed with them
    (qtsearch.index.bm25), and SQLite's FTS5 ranks with these same values, so a search cannot
    change them; one that asks for others is refused (`for_search`).
    """

    fusion: str = DEFAULT_FUSION
    lexical_weight: float = LEXICAL_WEIGHT
    feedback: float = 0.0
    lexical_feedback: float = 0.0
    candidates: int = CANDIDATES
    alignment: float = ALIGNMENT
    alignment_depth: int = ALIGNMENT_DEPTH
    k1: float = K1
    b: float = B

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise UsageError(f"unknown fusion {self.fusion!r}; choose from {', '.join(FUSIONS)}")
        if not 0.0 <= self.lexical_weight <= 1.0:
            raise UsageError(f"lexical_weight must be between 0 and 1 (got {self.lexical_weight})")
        if not self.feedback >= 0.0:
            raise UsageError(f"feedback must be 0 or more (got {self.feedback})")
        for name in ("candidates", "alignment_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a whole number, 1 or more (got {value!r})")
        if not 0.0 <= self.lexical_feedback < 1.0:
            raise UsageError(f"lexical_feedback must be 0 or more and below 1 (got "
                             f"{self.lexical_feedback})")
        if not 0.0 <= self.alignment < 1.0:
            raise UsageError(f"alignment must be 0 or more and below 1 (got {self.alignment})")

    def for_search(self, asked: SearchSettings | None) -> SearchSettings:
        """The settings one search of an index whose own are these runs with: `asked`, or
        these for None; refused when `asked` wants BM25 k1 or b other than the index's."""
        if asked is None:
            return self
        if (asked.k1, asked.b) != (self.k1, self.b):
            raise UsageError(f"BM25 k1 and b are fixed when an index is built (this one: "
                             f"k1={self.k1:g}, b={self.b:g}); asked k1={asked.k1:g}, "
                             f"b={asked.b:g}")
        return asked


def settings_for(model_weight: float, mean_terms: float | None,
                 bm25: tuple[float, float] | None = None, **overrides: Any) -> SearchSettings:
    """The settings of an index whose rows hold `mean_terms` BM25 terms on average (None: not
    known, as for an index without BM25 files: treated as sentences), for a model whose own
    BM25 weight (chosen on sentences) is `model_weight`; `bm25`: the (k1, b) its BM25 files
    were built with (None: no files; FTS5 ranks with K1 and B). `overrides`: fields of
    SearchSettings the caller sets, which win over those resolved here."""
    names = [f.name for f in fields(SearchSettings)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise UsageError(f"unknown search setting {', '.join(unknown)}; the settings are "
                         f"{', '.join(names)}")
    span = PASSAGE_TERMS - SENTENCE_TERMS
    share = 0.0 if mean_terms is None else min(1.0, max(0.0, (mean_terms - SENTENCE_TERMS) / span))
    k1, b = bm25 or (K1, B)

    def towards(sentences: float, passages: float) -> float:
        """A setting `share` of the way from its value over sentences to its value over
        passages."""
        return sentences + share * (passages - sentences)

    own = SearchSettings(lexical_weight=towards(model_weight, PASSAGE_LEXICAL_WEIGHT),
                         feedback=towards(0.0, FEEDBACK),
                         lexical_feedback=towards(0.0, LEXICAL_FEEDBACK),
                         alignment_depth=round(towards(ALIGNMENT_DEPTH, PASSAGE_ALIGNMENT_DEPTH)),
                         k1=k1, b=b)
    return own.for_search(replace(own, **overrides)) if overrides else own


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


def z_scores(values: Any, mean: float, std: float) -> Any:
    """`values` (an array or one number) as z-scores by this mean and standard deviation: 0
    where the deviation is 0."""
    return (values - mean) / std if std > 1e-12 else values * 0.0


def spread(values: np.ndarray) -> tuple[float, float]:
    """The mean and standard deviation of `values` ((0, 0) when empty): numpy's `mean()` and
    `std()` to the bit, the same reductions in the same order, without their ~10 µs each of
    dispatch (a hybrid query takes six)."""
    if not len(values):
        return 0.0, 0.0
    mean = np.add.reduce(values) / len(values)
    deviations = values - mean
    return float(mean), float(np.sqrt(np.add.reduce(deviations * deviations) / len(values)))


def standardised(values: np.ndarray) -> np.ndarray:
    """Each value's z-score among `values` (all 0 when they are all equal)."""
    return z_scores(values, *spread(values))


def fused(first: np.ndarray, second: np.ndarray, weight: float) -> np.ndarray:
    """A re-ranked score of each hit: `(1 - weight) · z(first) + weight · z(second)`, each z
    over these hits; `second` itself at weight 1."""
    if weight >= 1.0:
        return second
    return ((1.0 - weight) * standardised(np.asarray(first, dtype=np.float64))
            + weight * standardised(np.asarray(second, dtype=np.float64)))


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
    s = standardised(np.array([sem[i] for i in union]))
    lx = standardised(np.array([lex[i] for i in union]))
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
