"""Run the Yelp analogy benchmark for several encoders side by side.

The candidate pool is every Yelp sentence plus any tuple sentence not among them (the normalised
sentiment rewrites). Encoding the pool (~172k sentences) dominates the cost, so each encoder's
normalised pool matrix is cached as .npy under the qtsearch cache, keyed by the encoder's
fingerprint and a digest of the pool: a model that changes gets a new key, never stale vectors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.core.paths import cache_dir
from qtsearch.encoders.base import SentenceEncoder, l2_normalize
from qtsearch.evaluation.analogy.build import QUESTIONS, SENTIMENT, AnalogyTuple
from qtsearch.evaluation.analogy.data import load_yelp, unique
from qtsearch.evaluation.analogy.metrics import MODES, rank_answers, scores_by_group
from qtsearch.text.digest import sentences_digest

OVERALL = "overall"  # all word-analogy questions (the sentiment task is reported on its own)


@dataclass
class Questions:
    """Every question of a tuple set as pool indexes (a, b, c, d), with its category."""

    abcd: np.ndarray  # int64 [n, 4]
    category: list[str]
    task: list[str]


@dataclass
class ModelResult:
    name: str
    fingerprint: str
    dim: int
    scores: dict[str, dict[str, Any]]  # category | "overall" → {"questions", "excluding", …}
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "fingerprint": self.fingerprint, "dim": self.dim,
                "categories": {k: v for k, v in self.scores.items() if k != OVERALL},
                OVERALL: self.scores.get(OVERALL)}


def build_pool(tuples: Sequence[AnalogyTuple], data_dir: Path | None = None) -> list[str]:
    """All Yelp sentences, then the tuple sentences that are not among them."""
    return unique([*load_yelp(data_dir), *(s for t in tuples for s in t.sentences)])


def questions(tuples: Sequence[AnalogyTuple], pool: list[str]) -> Questions:
    """The four questions of each tuple as pool indexes (the pool must hold every sentence)."""
    index = {s: i for i, s in enumerate(pool)}
    rows, cats, tasks = [], [], []
    for t in tuples:
        try:
            ids = [index[" ".join(s.split())] for s in t.sentences]
        except KeyError as e:
            raise InputError(f"tuple {t.id}: sentence not in the pool: {e.args[0]!r}") from e
        for order in QUESTIONS:
            rows.append([ids[k] for k in order])
            cats.append(t.category)
            tasks.append(t.task)
    return Questions(np.array(rows, dtype=np.int64).reshape(-1, 4), cats, tasks)


def pool_cache_path(encoder: SentenceEncoder, digest: str) -> Path:
    return cache_dir("analogy") / f"{encoder.fingerprint}-{digest}.npy"


def encode_pool(
    encoder: SentenceEncoder,
    pool: list[str],
    use_cache: bool = True,
    batch_size: int = 512,
    progress: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, bool]:
    """The pool's unit-normalised vectors, and whether they came from the cache."""
    path = pool_cache_path(encoder, sentences_digest(pool))
    if use_cache and path.is_file():
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape == (len(pool), encoder.dim):
            return vectors, True
    vectors = l2_normalize(np.ascontiguousarray(
        encoder.encode(pool, batch_size=batch_size, progress=progress), dtype=np.float32))
    if use_cache:
        tmp = path.with_name(path.name + ".tmp.npy")
        np.save(tmp, vectors)
        os.replace(tmp, path)
    return vectors, False


def evaluate(
    encoder: SentenceEncoder,
    tuples: Sequence[AnalogyTuple],
    pool: list[str],
    use_cache: bool = True,
    batch_size: int = 512,
    progress: Callable[[int], None] | None = None,
) -> ModelResult:
    """Scores of one encoder per category, "overall" (word analogies) and "sentiment"."""
    qs = questions(tuples, pool)
    vectors, cached = encode_pool(encoder, pool, use_cache, batch_size, progress)
    ranks = rank_answers(vectors, qs.abcd)
    c = qs.abcd[:, 2]
    scores = scores_by_group(ranks, qs.category, c)
    word = np.array([t != SENTIMENT for t in qs.task])
    if word.any():
        scores[OVERALL] = scores_by_group(ranks, np.where(word, OVERALL, SENTIMENT), c)[OVERALL]
    return ModelResult(encoder.name, encoder.fingerprint, encoder.dim, scores, cached)


def category_order(results: Sequence[ModelResult]) -> list[str]:
    """Google sections, then MSR categories, then overall, then sentiment (rows of Table 6)."""
    cats = {c for r in results for c in r.scores}
    google = sorted(c for c in cats if c[0].islower() and c not in (OVERALL, SENTIMENT))
    msr = sorted(c for c in cats if c[0].isupper())
    return google + msr + [c for c in (OVERALL, SENTIMENT) if c in cats]


def report_json(results: Sequence[ModelResult], tuples_path: Path, pool_size: int) -> dict:
    return {"tuples": str(tuples_path), "pool": pool_size, "modes": list(MODES),
            "models": [r.to_json() for r in results]}
