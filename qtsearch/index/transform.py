"""Vectors fitted to the index: a linear post-processing of the encoder's vectors, fitted at build
time on a sample of the corpus and applied to every vector the index holds and every query.

Sentence vectors share a large common component and a few dominant directions (word frequency,
sentence length), so their cosines are all high and say little; removing the mean and those
directions, or whitening, spreads them (Mu & Viswanath 2018, "All-but-the-top"; Su et al. 2021,
"Whitening sentence representations"). Kinds (`build-index --fit`):

- `none`: the encoder's vectors as they are;
- `centre`: minus the corpus mean;
- `abtt:D`: centred, then the top D principal directions removed;
- `whiten:K`: centred, projected on the top K principal directions, each scaled to unit variance;
- `auto` (the default): `whiten:768` under 300k sentences, `centre` from there on.

Stored as `transform.safetensors` (the arrays) + `transform.json` (what it is), never pickle.
Every output is L2-normalised, so the index keeps its cosine (inner product) metric.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.config import mapped_tensors, save_tensors, write_json_atomic
from qtsearch.core.errors import UnusableIndex, UsageError
from qtsearch.index.choose import PARTITIONED, SQ8_MAX, WHITEN

TRANSFORM_FILE = "transform.safetensors"
TRANSFORM_JSON = "transform.json"
KINDS = ("none", "centre", "abtt", "whiten")
#: Corpus vectors the transform is fitted on (a fixed-seed sample of larger corpora).
FIT_SAMPLE = 50_000
#: Eigenvalues below this share of the largest are floored there before whitening, so nearly
#: empty directions are not blown up into noise.
_EPS = 1e-6


def parse_fit(spec: str) -> tuple[str, int]:
    """`none` | `centre` | `abtt:D` | `whiten:K` → (kind, D or K; 0 where none applies)."""
    kind, _, num = spec.strip().lower().partition(":")
    kind = "centre" if kind == "center" else kind
    if kind not in KINDS or (kind in ("abtt", "whiten")) != bool(num):
        raise UsageError(f"--fit must be auto, none, centre, abtt:D or whiten:K, not {spec!r}")
    try:
        k = int(num) if num else 0
    except ValueError:
        k = -1
    if k < 0 or (num and k == 0):
        raise UsageError(f"--fit {spec!r}: D and K must be positive whole numbers")
    return kind, k


def canonical_fit(spec: str) -> str:
    """The one spelling of a `--fit` value (`center` → `centre`, `WHITEN:256` → `whiten:256`)."""
    if spec.strip().lower() == "auto":
        return "auto"
    kind, k = parse_fit(spec)
    return f"{kind}:{k}" if k else kind


def auto_fit(count: int, preferred: str | None = None) -> str:
    """What `--fit auto` fits for a corpus of `count` sentences: the model's own choice when its
    folder records one (`"search": {"fit": …}` in config.json: a model trained for cosine
    search loses by whitening), else the rule of DEFAULT_FIT."""
    if preferred:
        return canonical_fit(preferred)
    return WHITEN if count < SQ8_MAX else PARTITIONED


@dataclass
class VectorTransform:
    """y = normalise((x - mean) @ matrix) for `whiten`, normalise(c - (c @ matrix.T) @ matrix)
    with c = x - mean for `abtt` (matrix: the directions removed), normalise(x - mean) for
    `centre`."""

    kind: str
    mean: np.ndarray  # [in_dim] float32
    matrix: np.ndarray  # whiten: [in_dim, out_dim]; abtt: [D, in_dim]; centre: [0, in_dim]
    fitted_on: int  # vectors in the fitting sample

    @property
    def in_dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def out_dim(self) -> int:
        return int(self.matrix.shape[1]) if self.kind == "whiten" else self.in_dim

    @property
    def spec(self) -> str:
        return self.kind if self.kind == "centre" else f"{self.kind}:{self._k()}"

    def _k(self) -> int:
        return int(self.matrix.shape[1] if self.kind == "whiten" else self.matrix.shape[0])

    @classmethod
    def fit(cls, x: np.ndarray, spec: str) -> VectorTransform | None:
        """Fit on the rows of `x` (corpus vectors); None for `none`. D and K are capped at
        the dimensions, and K at half the sample: whitening nearly as many directions as there
        are vectors fits noise, and scored below no transform at all on STS-B dev."""
        kind, k = parse_fit(spec)
        if kind == "none":
            return None
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[0] < 2:
            raise UsageError(f"--fit {spec}: needs at least 2 vectors to fit, got {x.shape[0]}")
        mean = x.mean(axis=0, dtype=np.float64)
        n, dim = x.shape
        if kind == "centre":
            return cls(kind, mean.astype(np.float32), np.zeros((0, dim), np.float32), n)
        c = x - mean.astype(np.float32)
        # the covariance product in float32 (half the time of float64 on 50k x 1200; the
        # directions kept are far above its rounding), decomposed in float64
        cov = (c.T @ c).astype(np.float64) / (n - 1)
        values, vectors = np.linalg.eigh(cov)  # ascending
        k = min(k, dim, n - 1 if kind == "abtt" else max(1, n // 2))
        top, top_values = vectors[:, ::-1][:, :k], values[::-1][:k]
        if kind == "abtt":
            matrix = top.T
        else:
            floor = max(float(values[-1]), 1e-12) * _EPS
            matrix = top / np.sqrt(np.maximum(top_values, floor))[None, :]
        return cls(kind, mean.astype(np.float32), np.ascontiguousarray(matrix, np.float32), n)

    @property
    def by_row(self) -> bool:
        """Whether a row's result depends on that row alone, bit for bit, however many rows
        are transformed together (no matrix product, whose blocking may differ)."""
        return self.kind == "centre"

    def apply(self, x: np.ndarray) -> np.ndarray:
        """float32 [n, out_dim], rows L2-normalised (a row that ends at zero stays zero)."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.in_dim:
            raise UnusableIndex(f"vectors of dim {x.shape[-1]} given to a transform fitted on "
                              f"dim {self.in_dim}")
        y = x - self.mean
        if self.kind == "whiten":
            y = y @ self.matrix
        elif self.kind == "abtt":
            y -= (y @ self.matrix.T) @ self.matrix
        y = np.ascontiguousarray(y, dtype=np.float32)
        y /= np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
        return y

    def describe(self) -> dict[str, Any]:
        """For the manifest and `qtsearch info`."""
        return {"kind": self.kind, "spec": self.spec, "in_dim": self.in_dim,
                "out_dim": self.out_dim, "fitted_on": self.fitted_on, "file": TRANSFORM_FILE}

    def save(self, folder: str | os.PathLike) -> None:
        """transform.safetensors then transform.json (each atomically): `load` needs both."""
        save_tensors({"mean": self.mean, "matrix": self.matrix}, Path(folder) / TRANSFORM_FILE)
        write_json_atomic(Path(folder) / TRANSFORM_JSON, self.describe())

    @classmethod
    def load(cls, folder: str | os.PathLike) -> VectorTransform | None:
        """The transform of an index folder; None when it has none (`--fit none`, or an index
        built before transforms existed). A broken one raises UnusableIndex (one line)."""
        folder = Path(folder)
        path, meta = folder / TRANSFORM_FILE, folder / TRANSFORM_JSON
        if not path.is_file() and not meta.is_file():
            return None
        try:
            info = json.loads(meta.read_text(encoding="utf-8"))
            arrays = mapped_tensors(path)[1]
            t = cls(info["kind"], arrays["mean"], arrays["matrix"], int(info["fitted_on"]))
        except Exception as e:  # missing half, bad JSON, bad tensors: the index is damaged
            raise UnusableIndex(f"{folder}: unreadable vector transform ({e}); rebuild the "
                              f"index") from e
        if t.kind not in KINDS[1:] or t.out_dim != info.get("out_dim"):
            raise UnusableIndex(f"{folder}: corrupt vector transform; rebuild the index")
        return t
