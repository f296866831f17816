"""Sentences → vectors with a trained model folder.

Sentences are tokenised, sorted by length and encoded in batches of similar length (little
padding), then put back in input order. The vector of a sentence is [f(s); g(s)].
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qtsearch.device import autocast_dtype, check_device, resolve_device
from qtsearch.errors import ModelError
from qtsearch.models.files import (
    PIECES,
    EncoderConfig,
    config_fields,
    fingerprint,
    is_model_folder,
    latest_validation,
    read_config,
    read_vocab,
)
from qtsearch.text.tokenizer import token_ids, tokenize

if TYPE_CHECKING:  # torch is imported by `Encoder` itself: `MeanEncoder` runs without it
    from typing import TypeAlias

    import torch

    from qtsearch.device import Cpu
    from qtsearch.encode.baselines import GloveBow, MiniLM
    from qtsearch.encode.mean import MeanEncoder
    from qtsearch.encode.static import Model2Vec
    from qtsearch.inference.fused import SmallBatchEncoder
    from qtsearch.inference.stepped import SteppedEncoder

    #: Encoders loaded by name (`load_external`): `name`, `dim`, `fingerprint`, `path` (the
    #: name), `device`, `encode`, `known_words`, `warm_up` like `Encoder`, but no token ids.
    ExternalEncoder: TypeAlias = MiniLM | Model2Vec | GloveBow

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "default_model"
#: Batches up to this size go through the query path (qtsearch.inference.fused) on the CPU;
#: above it torch's batched kernels are faster.
SMALL_BATCH = 16


def default_model_path() -> Path:
    """The model shipped inside the package, used whenever `--model` is left out."""
    if not is_model_folder(DEFAULT_MODEL):
        raise ModelError("no default model is installed with this qtsearch; pass --model DIR")
    return DEFAULT_MODEL


class FolderEncoder:
    """What every encoder of a model folder shares, torch or not: the vocabulary and its token
    ids (the build's token path), the fingerprint, the model's search settings. Subclasses
    set `dim` and `device` and implement `encode_ids`."""

    dim: int
    device: torch.device | Cpu

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_model_path()
        self.config = read_config(self.path)
        self.cfg: EncoderConfig = config_fields(self.config)
        self.vocab = read_vocab(self.path, self.cfg)
        self.max_len = self.cfg.max_len
        self.fingerprint = fingerprint(self.path)
        #: search settings measured for this model (config.json "search": fit, lexical_weight)
        self.search: dict[str, Any] = dict(self.config.get("search") or {})

    @property
    def name(self) -> str:
        return self.path.name if self.path != DEFAULT_MODEL else "default"

    def info(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "fingerprint": self.fingerprint,
            "dim": self.dim,
            "encoder": self.cfg.encoder,
            "validation": latest_validation(self.path),
        }

    def token_ids(self, sentence: str) -> list[int]:
        """Vocabulary ids, a word unknown as written looked up in another casing ("hello" as
        "Hello"): the one lookup of index builds and queries."""
        return token_ids(self.vocab, sentence, self.max_len)

    def known_words(self, sentence: str) -> int:
        """How many of the sentence's tokens are in the vocabulary (0: the query says nothing)."""
        return sum(1 for t in tokenize(sentence) if self.vocab.knows(t))

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Encode sentences in input order; `progress(n)` is called after each batch."""
        ids = [self.token_ids(s) for s in sentences]
        return self.encode_ids(ids, batch_size, normalize, progress)

    def encode_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors of token-id lists (the build's path: ids made once, by `token_ids`)."""
        raise NotImplementedError

    #: Whether a thread may tokenise the next input while `encode_ids` runs (the build's).
    tokenises_alongside = False

    def warm_up(self) -> None:
        """Get the query path ready ahead of the first query (nothing to do by default)."""


class Encoder(FolderEncoder):
    """A loaded model in torch: `encode(sentences)` gives a float32 matrix [n, dim]."""

    def __init__(
        self, path: str | os.PathLike | None = None, device: str = "auto", precision: str = "auto"
    ):
        from qtsearch.models.encoders import QuickThoughts
        from qtsearch.models.folder import encoder_config, load_weights

        super().__init__(path)
        if self.cfg.encoder == "mean" and (self.path / PIECES).is_file():
            # its words outside the table are composed by the numpy encoder alone: torch would
            # give them <unk> under the same fingerprint
            raise ModelError(f"{self.path}: a mean model with a pieces table is encoded by "
                             "MeanEncoder (load_encoder picks it), not by Encoder")
        self.model = load_weights(self.path, encoder_config(self.config))
        self.device = resolve_device(device)
        self.amp = autocast_dtype(self.device, precision)
        self.model.to(self.device)
        self.dim = self.model.dim
        #: [f(s); g(s)] of a Quick-Thoughts model: the compiled CPU paths' models, and the
        #: halves NextSent scores as f(query)·g(candidate)
        self.quick_thoughts = isinstance(self.model, QuickThoughts)

    def encode_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        import torch

        small = self._small_batches if len(ids) <= SMALL_BATCH else None
        if small is not None and ids:
            out = small.embed([list(x) for x in ids])
            if progress:
                progress(len(ids))
            return l2_normalize(out) if normalize else out
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        padded = PaddedBatches(ids)
        autocast = (
            torch.autocast(self.device.type, dtype=self.amp)
            if self.amp
            else contextlib.nullcontext()
        )
        batches = ((rows, torch.from_numpy(batch).to(self.device),
                    torch.from_numpy(lengths).to(self.device))
                   for rows, batch, lengths in padded.batches(batch_size))
        with torch.inference_mode(), autocast:
            if self._large_batches is not None:
                vectors = self._large_batches.embed_all(batches)
            else:
                vectors = ((rows, self.model.embed(b, n)) for rows, b, n in batches)
            for rows, vec in vectors:
                vec = vec.float().cpu().numpy()
                out[rows] = l2_normalize(vec) if normalize else vec
                if progress:
                    progress(len(rows))
        return out

    @property  # type: ignore[override]
    def tokenises_alongside(self) -> bool:
        """Whether a thread may tokenise the next input while `encode_ids` runs: on a GPU,
        and on the CPU batch path, whose threads never wait for each other within a step
        (100k Gutenberg sentences in shards of 10k: 6% faster). Not through `nn.GRU` on the
        CPU: every timestep ends at an OpenMP barrier, which waits for a thread descheduled
        by the tokeniser (a small GRU ran 20x slower on 2 cores)."""
        return self.device.type == "cuda" or self._large_batches is not None

    def warm_up(self) -> None:
        """Get the query path ready ahead of the first query: its compiled loop loaded and
        every word's input projection computed (~0.5 s, 288 MB for the shipped model)."""
        if self._small_batches is not None:
            self._small_batches.warm_up()

    @cached_property
    def _large_batches(self) -> SteppedEncoder | None:
        """The CPU path for batches (qtsearch.inference.stepped), where the model has one (a
        QT model of GRUs). Imported here, like the query path: only work that embeds with such
        a model should pay for numba."""
        if self.device.type != "cpu" or not self.quick_thoughts:
            return None
        import torch

        from qtsearch.inference.stepped import SteppedEncoder

        return SteppedEncoder.for_model(self.model, self.amp or torch.float32)

    @cached_property
    def _small_batches(self) -> SmallBatchEncoder | None:
        """The query path for a few sentences, where it applies: fp32 on the CPU, a QT model
        (of GRUs). Imported here: numba costs ~0.5 s to import, which only query-time work
        with such a model should pay (not a one-shot search of the shipped mean model)."""
        if self.device.type != "cpu" or self.amp is not None or not self.quick_thoughts:
            return None
        from qtsearch.inference.fused import SmallBatchEncoder

        return SmallBatchEncoder.for_model(self.model)


class PaddedBatches:
    """Token-id lists cut into length-sorted batches of right-padded rows, with numpy ops on
    one flat array of every id (a Python loop per row cost ~10 µs a sentence)."""

    def __init__(self, ids: Sequence[list[int]]):
        self.lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        self.flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64,
                                count=int(self.lengths.sum()))
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.order = np.argsort(self.lengths, kind="stable")

    def batches(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(row numbers, padded ids [n, longest], lengths) per batch, shortest rows first."""
        for s in range(0, len(self.order), size):
            rows = self.order[s : s + size]
            lengths = self.lengths[rows]
            steps = np.arange(int(lengths.max()))
            real = steps[None, :] < lengths[:, None]
            at = self.starts[rows, None] + np.minimum(steps[None, :], lengths[:, None] - 1)
            yield rows, np.where(real, self.flat[at], 0), lengths


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in place (all-zero rows stay zero)."""
    x /= np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x))[:, None], 1e-12)
    return x


#: Encoders `load_encoder` takes by name instead of a model folder (the optional extra
#: `[encoders]` provides minilm and model2vec; glove ships with qtsearch).
EXTERNAL_ENCODERS = ("minilm", "model2vec", "glove")


def load_encoder(
    path: str | os.PathLike | None = None, device: str = "auto", precision: str = "auto"
) -> Encoder | MeanEncoder | ExternalEncoder:
    """Load a model folder (None: the shipped default model), or an encoder by name
    (EXTERNAL_ENCODERS: all-MiniLM-L6-v2, model2vec distilled from it, mean GloVe), which has
    the same interface as `Encoder` for indexing and search but no token-id fast path.

    A mean-of-words model on the CPU is encoded in numpy (`MeanEncoder`: the same vectors
    within 1e-6, faster than torch on batches, and torch is never imported); `device` "cpu"
    decides that without torch, "auto" asks torch whether a GPU is there. A mean model with a
    pieces table (an open vocabulary, qtsearch.encode.pieces) is `MeanEncoder` on every
    device: its composed words are rows that only the numpy table has."""
    if isinstance(path, str) and path in EXTERNAL_ENCODERS:
        return load_external(path, device)
    folder = Path(path) if path is not None else default_model_path()
    check_device(device)
    if config_fields(read_config(folder)).encoder == "mean" and (
            device == "cpu" or (folder / PIECES).is_file()
            or resolve_device(device).type == "cpu"):
        from qtsearch.encode.mean import MeanEncoder

        return MeanEncoder(folder)
    return Encoder(folder, device=device, precision=precision)


def load_external(name: str, device: str = "auto") -> ExternalEncoder:
    """One of EXTERNAL_ENCODERS by name; a ModelError names the extra to install if absent."""
    from qtsearch.encode.baselines import GloveBow, MiniLM

    if name == "minilm":
        return MiniLM(device=device)
    if name == "model2vec":
        from qtsearch.encode.static import Model2Vec

        return Model2Vec(device=device)
    if name == "glove":
        return GloveBow()
    raise ModelError(f"unknown encoder {name!r}; choose from {', '.join(EXTERNAL_ENCODERS)} "
                     "or give a model folder")
