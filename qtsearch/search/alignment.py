"""Word alignment: the first hits looked at again, word by word, with the model's own words.

A mean of word vectors loses which words met which: "the capital of Australia" and "the
capital of South Australia" are nearly one vector. Once the first stage (hybrid or semantic)
has ranked its candidates, each of the first `depth` hits is scored by how well the query's
words find a partner among the hit's words: for every query word its best cosine with a word
of the hit, averaged with the query word's vector length as its weight (the trained table
gives "the" a length near 1 and "telephone" near 7, so the words that carry a query count
most). The same word in both scores 1, a related one its cosine: late interaction, as in
ColBERT, over the static table the index already uses, so it needs no other model and costs a
small matrix product a query.

A hit's score is then `(1 - weight) · z(first stage) + weight · z(alignment)`, each z over the
re-scored hits (`qtsearch.search.fusion.fused`). Measured on SQuAD's development answers, the
paraphrase sets and BEIR's development splits (docs/retrieval.md, "Word alignment").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from qtsearch.search.fusion import Leg, fused
from qtsearch.search.hits import Aligned, Basis


class WordRows(Protocol):
    """An encoder whose words have rows of their own (the mean-of-words model)."""

    def word_rows(self, text: str) -> np.ndarray: ...


def aligns(encoder: object) -> bool:
    """Whether `encoder` can align words (it has a word table)."""
    return callable(getattr(encoder, "word_rows", None))


def _unit(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(rows, axis=1)
    return rows / np.maximum(norms, 1e-12)[:, None], norms


def alignment(query: np.ndarray, hits: Sequence[np.ndarray]) -> np.ndarray:
    """Each hit's alignment with the query, from their word rows (a hit with no row scores
    0): Σ_q |q| · max_h cos(q, h) / Σ_q |q| over the query's words q and the hit's words h."""
    out = np.zeros(len(hits), dtype=np.float64)
    kept = [j for j, rows in enumerate(hits) if len(rows)]
    if not len(query) or not kept:
        return out
    q, weights = _unit(np.asarray(query, dtype=np.float32))
    if weights.sum() <= 1e-12:
        return out
    lengths = np.array([len(hits[j]) for j in kept])
    words, _ = _unit(np.concatenate([hits[j] for j in kept]).astype(np.float32, copy=False))
    best = np.maximum.reduceat(q @ words.T, np.cumsum(lengths) - lengths, axis=1)
    out[kept] = (weights @ best) / weights.sum()
    return out


def realign(query: str, order: Leg, legs: Mapping[str, Leg], depth: int, weight: float,
            encoder: WordRows, texts: Callable[[list[int]], Mapping[int, str]]
            ) -> tuple[Leg, dict[str, Leg], Aligned]:
    """The first `depth` ids of a ranking (`order`, best first) re-scored by alignment at
    `weight`, best first, and the per-leg scores with the first stage's (`first`) and the
    alignment (`alignment`) added; `texts(ids)`: the stored texts of ids. The ids past `depth`
    are dropped: a search asks for `depth` at least as many as it shows."""
    ids = list(order)[:depth]
    if not ids:
        return order, dict(legs), Aligned(weight, (0.0, 0.0), (0.0, 0.0))
    first = np.array([order[i] for i in ids], dtype=np.float64)
    stored = texts(ids)
    scores = alignment(encoder.word_rows(query), [encoder.word_rows(stored.get(i, ""))
                                                  for i in ids])
    mixed = fused(first, scores, weight)
    ranked = np.argsort(-mixed, kind="stable")
    new = {ids[j]: float(mixed[j]) for j in ranked}
    shown: dict[str, Leg] = {**legs, "first": dict(zip(ids, first.tolist(), strict=True)),
                             "alignment": dict(zip(ids, scores.tolist(), strict=True))}
    return new, shown, Aligned(weight, _spread(first), _spread(scores))


def realign_all(queries: Sequence[str], ranked: list[tuple[Leg, dict[str, Leg]]],
                bases: list[Basis], rows: Iterable[int], depth: int, weight: float,
                encoder: WordRows, get: Callable[[list[int]], dict[int, dict[str, Any]]]
                ) -> dict[int, dict[str, Any]]:
    """`realign` the ranking and basis of each query in `rows` in place; `get(ids)`: stored
    rows by id. The rows it read, by id (the hits need them next)."""
    fetched: dict[int, dict[str, Any]] = {}

    def texts(ids: list[int]) -> dict[int, str]:
        fetched.update(get([i for i in ids if i not in fetched]))
        return {i: fetched[i]["text"] for i in ids if i in fetched}

    for row in rows:
        order, legs, aligned = realign(queries[row], *ranked[row], depth, weight, encoder, texts)
        ranked[row], bases[row] = (order, legs), replace(bases[row], aligned=aligned)
    return fetched


def _spread(values: np.ndarray) -> tuple[float, float]:
    return (float(values.mean()), float(values.std())) if len(values) else (0.0, 0.0)


def explained(aligned: Aligned, legs: Mapping[str, float]) -> dict[str, Any]:
    """One hit's part of the alignment stage: the first stage's score and the alignment, each
    with its z and its part of the hit's score (the two parts add up to the score)."""
    out: dict[str, Any] = {"alignment_weight": aligned.weight}
    for name, (mean, std), share in (("first", aligned.first, 1.0 - aligned.weight),
                                     ("alignment", aligned.words, aligned.weight)):
        value = legs.get(name)
        z = (value - mean) / std if value is not None and std > 1e-12 else 0.0
        out[name] = {"score": value, "z": z, "part": share * z}
    return out
