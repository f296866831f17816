"""Corpus words: the rows an index's own corpus gives the words a mean model composes.

A composed word (qtsearch.encoders.pieces) is the mean of its pieces: near its meaning, but
coarse (a held-out known word's composed row is at cosine ~0.5 to its trained one). An index
knows more about the unknown words of its corpus than the pieces do: the passages they occur
in. At build time each composed word of the corpus is moved towards the mean of those
passages' vectors (centred on the corpus mean, scaled to the composed row's length, times
BETA), like a word vector read off its contexts, which raised the semantic leg's nDCG@10 on
SciFact and NFCorpus well above pieces alone (docs/open-vocabulary.md, "Measurements").

The rows are stored in the index folder (`CORPUS_WORDS`) and put into the encoder that serves
or extends the index (`with_corpus_words`): a text gets the same vector at build time, in
`add` and in a query. A word first seen in `add` or in a query keeps its plain composed row,
which is a function of the word alone, so that too is the same everywhere.

The file is a safetensors file holding the words sorted by their UTF-8 bytes (qtsearch.core.
sorted_lines), their offsets and their fp16 rows in that order. Opening an index memory-maps it
and reads nothing more: a query's word is looked up when the query first meets it (binary
search) and only its row is read. Giving every row to the encoder at open instead cost a
one-shot search most of its time and memory (docs/speed.md). Files written before the sorted
layout hold the words as a JSON list in the header: they are served the same way, through a
dict built at open.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qtsearch.core.config import mapped_tensors, save_tensors
from qtsearch.core.errors import UnusableIndex
from qtsearch.core.sorted_lines import find_line, line_blob
from qtsearch.encoders.base import TokenEncoder, flat_ids
from qtsearch.text.token_rows import TokenRows

if TYPE_CHECKING:
    from qtsearch.encoders.mean import MeanEncoder

#: The file in an index folder.
CORPUS_WORDS = "corpus_words.safetensors"
FORMAT = "qtsearch-corpus-words"
#: The header's `layout` of files whose words are sorted lines (older files have none).
SORTED = "sorted"
#: How far a word moves towards its passages, in units of its composed row's length: of 0.5-64
#: the best on SciFact train and NFCorpus dev together (docs/open-vocabulary.md). A long move
#: also weighs the word more in its text's mean, as a rare word should be.
BETA = 4.0
#: A word is a corpus word where it occurs in at least this many texts (fewer keep their
#: composed rows). 2 would keep the file far smaller on Wikipedia, where most composed words
#: occur in one sentence, but cost SciFact's semantic nDCG@10 (a claim and its abstract share
#: a rare word; docs/open-vocabulary.md, "Measurements"): every word counts. Rows are stored
#: in fp16.
MIN_TEXTS = 1
#: Token ids a build keeps from the corpus-words pass for its embedding pass (4 bytes each, and
#: ~100 bytes of array per text): ~1.5M sentences of 25 words; larger corpora tokenise again.
KEEP_TOKENS = 40_000_000


def corpus_words_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / CORPUS_WORDS


def refines(encoder: object) -> bool:
    """Whether `encoder` composes words (a mean model with a pieces table)."""
    return isinstance(encoder, TokenEncoder) and encoder.open_vocab is not None


def fit_corpus_words(encoder: MeanEncoder, shards: Iterable[Sequence[Sequence[int]]],
                     beta: float | None = None, progress: Callable[[int], None] | None = None,
                     keep: dict[int, Sequence[Sequence[int]]] | None = None,
                     min_texts: int | None = None) -> tuple[list[str], np.ndarray]:
    """(words, rows): every word of the texts that `encoder` composes, lower-cased, that
    occurs in at least `min_texts` texts (MIN_TEXTS), and its row moved towards the mean of
    the unit vectors of those texts, rounded to fp16 as stored. One pass over the texts'
    token ids (`encoder.token_ids`'s, made in the texts' order: the open vocabulary numbers
    words as it meets them), a shard at a time (`progress(n)` after each). `keep`: filled with each
    shard's token ids, by shard number, up to KEEP_TOKENS in all (setting the rows changes no
    id, so the build embeds them without tokenising twice)."""
    open_vocab = encoder.open_vocab
    assert open_vocab is not None, "corpus words are for a model with a pieces table"
    beta = BETA if beta is None else beta  # read when called: a benchmark may set BETA
    min_texts = MIN_TEXTS if min_texts is None else min_texts
    from scipy.sparse import csr_matrix

    base = open_vocab.table.base  # the model's rows: their length, without converting them
    total = np.zeros(encoder.dim, dtype=np.float64)
    count = 0
    sums = _Sums(encoder.dim)  # per composed id - base
    seen = np.zeros(0, dtype=np.int64)
    kept_tokens = 0
    # the product below is in float64: a shard's vectors are converted into one buffer kept
    # for every shard, where a new array each shard costs the kernel its pages again
    wide = np.empty((0, encoder.dim))
    for number, ids in enumerate(shards):
        vectors = encoder.encode_ids(ids, normalize=True)
        total += vectors.sum(axis=0, dtype=np.float64)
        count += len(vectors)
        if len(wide) < len(vectors):
            wide = np.empty((len(vectors), encoder.dim))
        np.copyto(wide[: len(vectors)], vectors)
        # a text counts once per composed word in it, however often the word occurs
        flat, lengths = flat_ids(ids)
        texts_of = np.repeat(np.arange(len(ids)), lengths)
        if keep is not None and kept_tokens + len(flat) <= KEEP_TOKENS:
            kept_tokens += len(flat)
            # the tokenising workers' int32 rows are kept as they are
            keep[number] = (ids if isinstance(ids, TokenRows) else TokenRows.from_offsets(
                flat.astype(np.int32), np.concatenate([[0], np.cumsum(lengths)])))
        composed = flat >= base
        # the shard's composed words only: a product over every word composed so far would
        # write (and zero) a row for each, hundreds of thousands a shard at 1M sentences
        words, row_of = np.unique(flat[composed] - base, return_inverse=True)
        if len(words) and words[-1] >= len(seen):  # room for every word composed so far
            seen = np.concatenate([seen, np.zeros(len(open_vocab.table) - base - len(seen),
                                                  dtype=np.int64)])
        occurs = csr_matrix((np.ones(len(row_of)), (row_of.reshape(-1), texts_of[composed])),
                            shape=(len(words), len(ids)))
        occurs.sum_duplicates()
        occurs.data[:] = 1
        sums.add(words, occurs @ wide[: len(vectors)])
        seen[words] += np.diff(occurs.indptr)
        if progress:
            progress(len(ids))
    used = np.flatnonzero(seen >= max(min_texts, 1))
    if not len(used):
        return [], np.zeros((0, encoder.dim), dtype=np.float32)
    whole, mean = open_vocab.table.view(), total / count
    rows = np.empty((len(used), encoder.dim), dtype=np.float32)
    # a block of words at a time, in place: every word at once held several float64 copies
    # of all their rows (hundreds of MB each at 1M sentences)
    for lo in range(0, len(used), _Sums.BLOCK):
        some = used[lo : lo + _Sums.BLOCK]
        table = whole[base + some]
        context = sums.take(some)
        context /= seen[some, None]
        context -= mean
        scale = np.linalg.norm(table, axis=1) / np.maximum(np.linalg.norm(context, axis=1),
                                                           1e-12)
        context *= (beta * scale)[:, None]
        context += table
        rows[lo : lo + len(some)] = context.astype(np.float16)  # as stored
    word_of = {j: w for w, j in open_vocab.composed.items() if j is not None and w == w.lower()}
    return [word_of[base + j] for j in used], rows


class _Sums:
    """float64 rows by id, zero until added to, kept in blocks of BLOCK rows: growing by a
    block copies none of the rows before (a build of 1M Wikipedia sentences composes 270,000
    words: one array grown to fit was copied whole at every shard, and held twice meanwhile)."""

    BLOCK = 16_384

    def __init__(self, dim: int):
        self.dim = dim
        self.blocks: list[np.ndarray] = []

    def add(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Add `rows` to the rows of `ids` (sorted, distinct)."""
        if not len(ids):
            return
        while len(self.blocks) * self.BLOCK <= ids[-1]:
            self.blocks.append(np.zeros((self.BLOCK, self.dim)))
        cuts = np.searchsorted(ids, np.arange(1, len(self.blocks)) * self.BLOCK)
        for number, (lo, hi) in enumerate(itertools.pairwise([0, *cuts.tolist(), len(ids)])):
            if hi > lo:
                self.blocks[number][ids[lo:hi] - number * self.BLOCK] += rows[lo:hi]

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The rows of `ids` (sorted), as one array."""
        block = ids // self.BLOCK
        return np.concatenate([np.zeros((0, self.dim))] + [
            self.blocks[b][ids[block == b] - b * self.BLOCK] for b in np.unique(block).tolist()])


def save_corpus_words(folder: str | os.PathLike, words: list[str], rows: np.ndarray,
                      beta: float) -> Path:
    """Write the words sorted, with their rows in that order (a word listed twice keeps its
    last row, as `set_corpus_words` leaves it)."""
    last = {w: i for i, w in enumerate(words)}
    order = sorted(last)
    blob, offsets = line_blob(order)
    picked = np.fromiter((last[w] for w in order), dtype=np.int64, count=len(order))
    path = corpus_words_path(folder)
    save_tensors({"rows": np.ascontiguousarray(rows[picked], dtype=np.float16),
                  "words": np.frombuffer(blob, dtype=np.uint8), "offsets": offsets}, path,
                 {"format": FORMAT, "layout": SORTED, "beta": str(beta)})
    return path


class CorpusWords:
    """An index's corpus words as stored: `row(word)` reads one word's row (float32), None
    for a word that has none; the rows stay in the mapped file until asked for."""

    def __init__(self, path: Path):
        try:
            meta, tensors = mapped_tensors(path)
            self.rows = tensors["rows"]
            if meta.get("layout") == SORTED:
                self._blob, self._offsets = tensors["words"], tensors["offsets"]
                self._index: dict[str, int] | None = None
                listed = len(self._offsets) - 1
            else:  # written before the sorted layout: the words are a JSON list
                words = json.loads(meta["words"])
                self._index = {w: i for i, w in enumerate(words)}  # the last row of a repeat
                listed = len(words)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UnusableIndex(f"{path}: not a valid corpus-words file ({e}); rebuild the "
                              "index") from e
        if meta.get("format") != FORMAT or self.rows.ndim != 2 or listed != len(self.rows):
            raise UnusableIndex(f"{path}: not a qtsearch corpus-words file; rebuild the index")
        self.dim = int(self.rows.shape[1])

    def __len__(self) -> int:
        return len(self.rows)

    def find(self, word: str) -> int | None:
        if self._index is not None:
            return self._index.get(word)
        return find_line(self._blob, self._offsets, word)

    def row(self, word: str) -> np.ndarray | None:
        i = self.find(word)
        return None if i is None else self.rows[i].astype(np.float32)

    def listed(self) -> tuple[list[str], np.ndarray]:
        """(every word once, the number of its row)."""
        if self._index is not None:
            return list(self._index), np.fromiter(self._index.values(), dtype=np.int64,
                                                  count=len(self._index))
        return (bytes(self._blob).decode("utf-8").split("\n")[:-1],
                np.arange(len(self.rows), dtype=np.int64))


def open_corpus_words(folder: str | os.PathLike) -> CorpusWords | None:
    """An index folder's corpus words, None where it has none (built without a pieces table,
    or before corpus words existed: its words are composed as the pieces say)."""
    path = corpus_words_path(folder)
    return CorpusWords(path) if path.is_file() else None


def load_corpus_words(folder: str | os.PathLike) -> tuple[list[str], np.ndarray] | None:
    """An index folder's corpus words and their rows (float32), all read; None as
    `open_corpus_words`."""
    found = open_corpus_words(folder)
    if found is None:
        return None
    words, rows = found.listed()
    return words, found.rows[rows].astype(np.float32)


def _check_dim(encoder: MeanEncoder, dim: int) -> None:
    if dim != encoder.dim:
        raise UnusableIndex(f"corpus words are {dim}-d, the model {encoder.dim}-d; "
                          "rebuild the index")


def set_corpus_words(encoder: MeanEncoder, words: list[str], rows: np.ndarray) -> None:
    """Give `encoder`'s composed words these rows (in place: the build's own encoder)."""
    open_vocab = encoder.open_vocab
    assert open_vocab is not None
    _check_dim(encoder, int(rows.shape[1]))
    open_vocab.set_rows(words, rows)


def with_corpus_words(encoder: Any, folder: str | os.PathLike) -> Any:
    """`encoder` as the index in `folder` encodes: a copy holding the index's corpus words
    where it has any (the encoder passed in may serve other indexes too), else `encoder`.
    The copy reads a word's row when a text first holds the word."""
    if not refines(encoder):
        return encoder
    found = open_corpus_words(folder)
    if found is None:
        return encoder
    _check_dim(encoder, found.dim)
    own = copy.copy(encoder)
    own.open_vocab = own.vocab = encoder.open_vocab.fresh(found)
    return own


def prepare_corpus_words(encoder: MeanEncoder, folder: str | os.PathLike,
                         shards: Iterable[Sequence[Sequence[int]]],
                         progress: Callable[[int], None] | None = None,
                         keep: dict[int, Sequence[Sequence[int]]] | None = None) -> int:
    """The build's step before embedding: fit the corpus words over every shard's token ids
    (`fit_corpus_words`; not read where the file is written already), give them to `encoder`
    and write them into the (partial) index `folder`; a resumed build reads the file it
    wrote. `keep`: the build's, filled with token ids as `fit_corpus_words` says, for an
    embedding pass in this process. How many words."""
    found = load_corpus_words(folder)
    if found is None:
        found = fit_corpus_words(encoder, shards, progress=progress, keep=keep)
        save_corpus_words(folder, *found, beta=BETA)
    set_corpus_words(encoder, *found)
    return len(found[0])
