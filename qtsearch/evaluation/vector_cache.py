"""Sentence vectors kept on disk between evaluation runs, so a second `qtsearch eval` of the same
model skips encoding.

A file holds the vectors of one task's distinct sentences, in first-seen order. Its folder is
named by the encoder's fingerprint (a hash of its weights, vocabulary and architecture) and how
it ran (device, autocast dtype: bf16 vectors are not fp32 vectors), and by the code that turns
text into vectors; its name is a hash of the sentences themselves, so a changed task file,
`--limit` or seed is a different file, and tasks with the same sentences (SICK-E, SICK-R) share
one. Nothing is ever stale: a changed model, encoding code or task simply misses. Files are
written whole and renamed, so a killed run leaves no torn file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from qtsearch.core.paths import code_key
from qtsearch.encoders.base import EvalEncoder

if TYPE_CHECKING:
    from qtsearch.encoders.base import SentenceEncoder

FORMAT = "v1"  # bump when the file layout changes
#: The rooms whose code turns text into vectors.
ENCODING_CODE = ("text", "encoders")


def encoder_key(encoder: SentenceEncoder) -> str:
    """What identifies an encoder's vectors: fingerprint, device type, autocast dtype (an
    encoder that does not say, fp32 on the CPU), and the code that turns text into vectors
    (a change in how a row is read changes vectors under the same fingerprint)."""
    device, amp = "cpu", None
    if isinstance(encoder, EvalEncoder):
        device, amp = encoder.device.type, encoder.amp
    precision = str(amp or "fp32").removeprefix("torch.")
    return f"{encoder.fingerprint}-{device}-{precision}-{_encoding_code_key()}"


@cache
def _encoding_code_key() -> str:
    return code_key(ENCODING_CODE)


class VectorStore:
    """The on-disk vectors of one encoder (under `$QTSEARCH_CACHE/eval/<encoder key>/`)."""

    def __init__(self, folder: Path):
        self.folder = folder

    @classmethod
    def for_encoder(cls, encoder: SentenceEncoder) -> VectorStore:
        from qtsearch.core.paths import cache_dir

        return cls(cache_dir("eval", encoder_key(encoder)))

    def path(self, texts: Sequence[str]) -> Path:
        h = hashlib.sha256(FORMAT.encode())
        for t in texts:
            h.update(t.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
        return self.folder / f"{h.hexdigest()[:24]}.npy"

    def load(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors [len(texts), dim] of these distinct texts, or None when not stored (or the
        file does not fit them)."""
        path = self.path(texts)
        try:
            vectors = np.load(path)
        except (OSError, ValueError):
            return None
        return vectors if vectors.ndim == 2 and len(vectors) == len(texts) else None

    def save(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store the vectors of these distinct texts; a cache that cannot be written is skipped
        (the run's figures do not depend on it)."""
        path = self.path(texts)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                np.save(fh, np.asarray(vectors, dtype=np.float32))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
