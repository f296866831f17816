"""Next-sentence retrieval on books the model never saw: a direct check of what Quick-Thoughts
learns (which sentence comes next).

The books (default: Gutenberg 0740–0757, held out from the shipped model's training) are read as
running text and split into sentences. Queries are sentences with a following sentence in the same
book, sampled reproducibly (`queries`, default 5,000); the candidates are all distinct sentences of
all the books, the query itself excluded. Reported: top-1 and top-10 accuracy (%) and the mean
reciprocal rank of the true next sentence under cosine similarity, with the chance level.
For a Quick-Thoughts model, `fg_*` also rank by f(query)·g(candidate), the score its training
objective uses (which rewards the previous sentence as much as the next one)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.encoders.base import EvalEncoder
from qtsearch.evaluation.data_files import sample
from qtsearch.evaluation.harness import EmbeddingCache, Task, register
from qtsearch.text.reader import read_sentences

#: Books held out from the shipped default model (trained on Gutenberg 0000–0739).
DEFAULT_BOOKS = "gutenberg/07[45]*.txt.gz"
CHUNK = 1000


def ranks(queries: np.ndarray, candidates: np.ndarray, q_rows: np.ndarray, t_rows: np.ndarray,
          tick: Callable[[], None] | None = None) -> np.ndarray:
    """1-based rank of each target among all candidates by dot product, the query's own row
    excluded; ties count against the target (a constant encoder gets no credit)."""
    out = np.empty(len(q_rows), dtype=np.int64)
    for s in range(0, len(q_rows), CHUNK):
        sl = slice(s, s + CHUNK)
        scores = queries[sl] @ candidates.T
        idx = np.arange(scores.shape[0])
        scores[idx, q_rows[sl]] = -np.inf
        target = scores[idx, t_rows[sl]].copy()
        scores[idx, t_rows[sl]] = -np.inf
        out[sl] = 1 + np.sum(scores >= target[:, None], axis=1)
        if tick:
            tick()
    return out


def summary(r: np.ndarray, prefix: str = "") -> dict[str, float]:
    return {f"{prefix}top1": float(np.mean(r == 1) * 100),
            f"{prefix}top10": float(np.mean(r <= 10) * 100),
            f"{prefix}mrr": float(np.mean(1.0 / r))}


@register
class NextSentence(Task):
    name = "NextSent"
    group = "retrieval"
    headline = ("top1", "mrr")
    description = "true next sentence among all sentences of held-out books"

    def load(self, data_dir: Path) -> None:
        books = ([Path(b) for b in self.config.books] if self.config.books
                 else sorted(data_dir.glob(DEFAULT_BOOKS)))
        if not books:
            raise InputError(f"{data_dir / DEFAULT_BOOKS}: no held-out books found (--books)")
        sents = list(read_sentences(books, split=True))
        self.pool = list(dict.fromkeys(s.text for s in sents))
        pairs = [(a.text, b.text) for a, b in itertools.pairwise(sents)
                 if a.doc == b.doc and a.text != b.text]
        if not pairs or len(self.pool) < 3:
            raise InputError("next-sentence books hold too few sentences")
        n = self.config.queries if self.config.limit is None else min(self.config.queries,
                                                                       self.config.limit)
        self.pairs = [pairs[i] for i in sample(len(pairs), n, self.config.seed)]
        self.books = books

    def sentences(self) -> list[str]:
        return self.pool

    def steps(self) -> int:
        return -(-len(self.pairs) // CHUNK) * 2

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        vectors = embed(self.pool)
        row = {t: i for i, t in enumerate(self.pool)}
        q = np.asarray([row[a] for a, _ in self.pairs])
        t = np.asarray([row[b] for _, b in self.pairs])
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        out = summary(ranks(unit[q], unit, q, t, tick))
        if isinstance(embed.encoder, EvalEncoder) and embed.encoder.quick_thoughts:  # [f(s); g(s)]
            half = vectors.shape[1] // 2
            out.update(summary(ranks(vectors[q, :half], vectors[:, half:], q, t, tick), "fg_"))
        out.update(chance=100.0 / (len(self.pool) - 1), candidates=float(len(self.pool)),
                   n=float(len(self.pairs)))
        return out
