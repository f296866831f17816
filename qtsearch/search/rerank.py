"""Re-ranking: a slower, stronger encoder re-scores the first stage's best hits.

The index answers from its own fast model (thousands of sentences a second at build time, a
few milliseconds a query); a re-ranker then encodes the query and the text of its first `depth`
hits with another encoder (all-MiniLM-L6-v2 by default) and orders them by that encoder's
cosine fused with the first stage's score (`weight`). The index never holds the re-ranker's
vectors, so it stays as quick to build as before, and a query pays only for `depth` + 1
encodings: the usual retrieve-then-re-rank pattern. It can only reorder what the first stage
found, so a deeper first stage finds more and costs more.

Fused rather than replaced: the first stage's score holds what the re-ranker cannot see, BM25's
exact rare words (names, dates, numbers), and on answers MiniLM's cosine alone ranks below the
first stage it re-orders (docs/benchmarks.md, "Re-ranking with a stronger encoder").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from qtsearch.core.errors import UsageError
from qtsearch.encoders.neural import Encoder
from qtsearch.encoders.registry import load_encoder
from qtsearch.search.defaults import RERANK_DEPTH, RERANK_WEIGHT
from qtsearch.search.fusion import fused
from qtsearch.search.hits import Results


class Reranker:
    """An encoder that re-scores hits: `reranker(queries, results, k)`. `encoder` is anything
    `load_encoder` takes (minilm, model2vec, glove, a model folder) or an encoder already
    loaded (shared between re-rankers of several depths). `weight`: the re-ranker's share of
    the fused score, `(1 - weight) · z(first stage) + weight · z(cosine)`, each z over the
    query's re-ranked hits; 1 orders by the cosine alone."""

    def __init__(self, encoder: str | Encoder = "minilm", depth: int = RERANK_DEPTH,
                 device: str = "cpu", weight: float = RERANK_WEIGHT):
        if depth < 1:
            raise UsageError(f"the re-ranking depth must be at least 1, not {depth}")
        if not 0.0 <= weight <= 1.0:
            raise UsageError(f"the re-ranker's weight must be between 0 and 1, not {weight}")
        self.depth = depth
        self.weight = weight
        # a re-ranker only compares its vectors with one another: the faster kind will do
        self.encoder = load_encoder(encoder, device, order_only=True) \
            if isinstance(encoder, str) else encoder
        self.name = encoder if isinstance(encoder, str) else str(encoder.path)

    def deeper(self, depth: int) -> Reranker:
        """The same re-ranker (encoder loaded once, weight) at another depth."""
        return Reranker(self.encoder, depth, weight=self.weight)

    def __call__(self, queries: Sequence[str], results: Sequence[Results],
                 k: int) -> list[Results]:
        """Each query's hits ordered by the fused score (`weight`), `k` of them. A hit's
        `score` becomes that score; its `legs` keep the first stage's scores and add `first`
        (the first stage's score) and `rerank` (the re-ranker's cosine)."""
        texts = [t for q, hits in zip(queries, results, strict=True)
                 for t in (q, *(h.text for h in hits))]
        vectors = self.encoder.encode(texts, normalize=True) if texts else np.empty((0, 0))
        reranked, at = [], 0
        for hits in results:
            query, found = vectors[at], vectors[at + 1 : at + 1 + len(hits)]
            at += 1 + len(hits)
            cosines = found @ query
            scores = fused(np.array([h.score for h in hits]), cosines, self.weight)
            order = np.argsort(-scores, kind="stable")[:k]
            reranked.append(Results(
                [dataclasses.replace(hits[j], score=float(scores[j]),
                                     legs={**(hits[j].legs or {}), "first": hits[j].score,
                                           "rerank": float(cosines[j])})
                 for j in order], hits.note, rerank_weight=self.weight))
        return reranked
