"""What every encoder shares: the protocols (`SentenceEncoder`, what the evaluation reads;
`IndexEncoder`, what the indexer and the search engine need of any encoder; `TokenEncoder`, of
one that works on token ids), unit-length rows, and the base of the encoders that read a model
folder (its vocabulary, token ids, fingerprint and settings), with the shipped default model's
place."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from qtsearch.core.errors import ModelError
from qtsearch.encoders.files import (
    DEFAULT_MODEL,
    EncoderConfig,
    config_fields,
    fingerprint,
    is_model_folder,
    latest_validation,
    read_config,
    read_vocab,
)
from qtsearch.text.token_rows import TokenRows
from qtsearch.text.tokenizer import token_ids, tokenize

if TYPE_CHECKING:  # torch is imported by the torch encoder itself: numpy encoders run without it
    import torch

    from qtsearch.core.device import Cpu
    from qtsearch.encoders.open_vocab import OpenVocab, WordCounts
    from qtsearch.text.vocab import Vocab


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


@runtime_checkable
class EvalEncoder(SentenceEncoder, Protocol):
    """A `SentenceEncoder` that says how its vectors were made. The evaluation's vector cache
    keys on where it runs and its autocast dtype (bf16 vectors are not fp32 vectors), and
    NextSent also scores a Quick-Thoughts vector's two halves apart. The evaluation takes any
    `SentenceEncoder`: one that is not this (a wrapper in a test) counts as fp32 on the CPU."""

    device: torch.device | Cpu
    amp: torch.dtype | None  # None: fp32
    quick_thoughts: bool  # the vector is [f(s); g(s)]


@runtime_checkable
class IndexEncoder(EvalEncoder, Protocol):
    """What the indexer and the search engine need of any encoder, ours or a baseline."""

    path: str | os.PathLike  # what `load_encoder` takes, written to an index's manifest
    search: dict[str, Any]  # search settings measured for the model (the engine's defaults)
    #: whether a sentence's vector has the same bits encoded alone or in any batch (a sum of
    #: its own rows); else a batch is computed in other kernels (padding, matrix products)
    rowwise: bool

    def known_words(self, sentence: str) -> int:
        """How many of the sentence's tokens the model knows (0: the query says nothing)."""
        ...

    def warm_up(self) -> None: ...


@runtime_checkable
class TokenEncoder(IndexEncoder, Protocol):
    """An encoder that works on token ids of a vocabulary of its own: the build tokenises
    once (in worker processes where it can) and embeds the ids, and the search engine reads
    its words. Runtime checks test every member with `hasattr`, so members are plain
    attributes or methods, never properties that compute (`tokenises_alongside` would load
    the CPU batch path on a query)."""

    vocab: Vocab  # an `OpenVocab` where `open_vocab` is set
    max_len: int
    #: the open vocabulary (qtsearch.encoders.open_vocab), None for a closed one: it numbers
    #: new words as it meets them, so its ids mean something only to this process's table
    open_vocab: OpenVocab | None
    #: whether a build reports the share of its tokens composed and unknown (`WordCounts`)
    counts_words: bool
    #: whether encoding is light work on one thread (a sum of rows), so that a build on the
    #: CPU tokenises on every core beside it (qtsearch.indexing.tokens.workers_for)
    light: bool

    def token_ids(self, sentence: str) -> list[int]: ...

    def encode_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
        counts: WordCounts | None = None,
    ) -> np.ndarray: ...

    def tokenises_alongside(self) -> bool: ...


def flat_ids(ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of several texts as one flat int64 array, and each text's count of them:
    from lists (a query's, the serial build's), from int32 arrays, or from `TokenRows` (what
    the build's tokenising workers give: a shard's ids in one array, not an array a text)."""
    if isinstance(ids, TokenRows):
        return ids.joined().astype(np.int64), ids.lengths()
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    if ids and isinstance(ids[0], np.ndarray):
        return np.concatenate(ids).astype(np.int64), lengths
    return np.fromiter(chain.from_iterable(ids), dtype=np.int64,
                       count=int(lengths.sum())), lengths


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in place (all-zero rows stay zero)."""
    x /= np.maximum(np.sqrt(np.einsum("ij,ij->i", x, x))[:, None], 1e-12)
    return x


class BatchEncoder:
    """The base of the encoders that take sentences rather than token ids (the baselines):
    `encode` cuts a call into batches of `batch_size` sentences, in `order`, reports each and
    scales the rows; a subclass encodes one batch (`encode_batch`)."""

    name: str
    dim: int
    fingerprint: str
    path: str
    device: torch.device | Cpu
    search: ClassVar[dict[str, Any]] = {}  # search settings: the engine's defaults
    amp: torch.dtype | None = None  # fp32: a baseline runs as its library loads it
    quick_thoughts = False
    rowwise = False

    def encode(
        self,
        sentences: Sequence[str],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Encode sentences in input order; `progress(n)` is called after each batch."""
        out = np.zeros((len(sentences), self.dim), dtype=np.float32)
        order = self.order(sentences)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self.encode_batch([sentences[i] for i in rows], len(sentences))
            if progress:
                progress(len(rows))
        return l2_normalize(out) if normalize else out

    def order(self, sentences: Sequence[str]) -> np.ndarray:
        """The order in which the batches take the sentences: as given, by default."""
        return np.arange(len(sentences))

    def encode_batch(self, batch: list[str], call_size: int) -> np.ndarray:
        """Vectors [len(batch), dim] of one batch of a call of `call_size` sentences (an
        encoder may batch a short call differently)."""
        raise NotImplementedError

    def known_words(self, sentence: str) -> int:
        """How many of the sentence's tokens the model knows (0: the query says nothing)."""
        raise NotImplementedError

    def warm_up(self) -> None:
        """Get the query path ready ahead of the first query (nothing to do by default: the
        model is loaded by the constructor)."""


def default_model_path() -> Path:
    """The model shipped inside the package, used whenever `--model` is left out."""
    if not is_model_folder(DEFAULT_MODEL):
        raise ModelError("no default model is installed with this qtsearch; pass --model DIR")
    return DEFAULT_MODEL


#: Tokens a mean-of-words model reads per row (the reader cuts a row at 10,000 characters):
#: the whole row, not the training length (`max_len`).
ROW_TOKENS = 4096
#: In that mean, a row's first LEAD_TOKENS tokens (the training length) weigh 1 and the rest
#: TAIL_WEIGHT: a passage's title and opening say what it is about, and its later sentences
#: add to it without drowning it (docs/retrieval.md, "Reading a passage whole"). numpy's
#: encoder (qtsearch.encoders.mean) and torch's (qtsearch.encoders.nn.mean_words) both weigh so.
LEAD_TOKENS = 50
TAIL_WEIGHT = 0.3


class FolderEncoder:
    """What every encoder of a model folder shares, torch or not: the vocabulary and its token
    ids (the build's token path), the fingerprint, the model's search settings. Subclasses
    set `dim` and `device` and implement `encode_ids`."""

    dim: int
    device: torch.device | Cpu
    amp: torch.dtype | None = None  # fp32 unless a subclass autocasts
    quick_thoughts = False
    #: a closed vocabulary unless a subclass composes words (`TokenEncoder.open_vocab`)
    open_vocab: OpenVocab | None = None
    counts_words = False
    light = False
    rowwise = False

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_model_path()
        self.config = read_config(self.path)
        self.cfg: EncoderConfig = config_fields(self.config)
        self.vocab = read_vocab(self.path, self.cfg)
        #: tokens of a row read: a mean of words, numpy's or torch's, costs nothing per
        #: position and reads a row whole; the others stop at their training length
        self.max_len = ROW_TOKENS if self.cfg.encoder == "mean" else self.cfg.max_len
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
        counts: WordCounts | None = None,
    ) -> np.ndarray:
        """Vectors of token-id lists (the build's path: ids made once, by `token_ids`);
        the tokens are added to `counts` where given (the build's, which owns it: the
        encoder may serve other builds and queries)."""
        raise NotImplementedError

    def tokenises_alongside(self) -> bool:
        """Whether a thread may tokenise the next input while `encode_ids` runs (the build's)."""
        return False

    def warm_up(self) -> None:
        """Get the query path ready ahead of the first query (nothing to do by default)."""
