"""Sentence analogies over an index: a : b :: c : ?, the Quick-Thoughts analogy query."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.search.hits import Results
from qtsearch.text.tokenizer import tokenize


class Searchable(Protocol):
    """What an analogy needs of an index (`qtsearch.search.searcher.Searcher` is one)."""

    count: int

    def embed(self, sentences: list[str]) -> np.ndarray: ...

    def clamp(self, k: int) -> int: ...

    def search_vectors(self, queries: np.ndarray, k: int) -> list[Results]: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _same_sentence(a: str, b: str) -> bool:
    """Equal up to spacing and case: what a user means by "that is one of my inputs"."""
    return [t.casefold() for t in tokenize(a)] == [t.casefold() for t in tokenize(b)]


def analogy(index: Searchable, a: str, b: str, c: str, k: int = 10,
            exclude_inputs: bool = True) -> Results:
    """Sentences d with a : b :: c : d, ranked by cos(d, normalise(c + b − a)) over
    normalised vectors (the Quick-Thoughts analogy query). The three inputs themselves
    are left out unless `exclude_inputs` is False."""
    va, vb, vc = index.embed([a, b, c])
    query = vc + vb - va
    if np.linalg.norm(query) < 1e-6:
        raise InputError("the analogy cancels out (c + b − a is zero): nothing to search for")
    query = _normalise(query)[None, :]
    k = index.clamp(k)
    if not exclude_inputs:
        return index.search_vectors(query, k)[0]
    inputs = [a, b, c]
    fetch = min(k + 3, index.count)
    while True:
        hits = [h for h in index.search_vectors(query, fetch)[0]
                if not any(_same_sentence(h.text, s) for s in inputs)]
        # duplicates of the inputs can crowd the list: widen until k remain or all seen
        if len(hits) >= k or fetch >= index.count:
            return Results(hits[:k])
        fetch = min(fetch * 4, index.count)
