"""The open vocabulary's tables: a closed vocabulary that hands composed words ids past its
rows (`OpenVocab`), the rows themselves (`GrowingTable`), and what a build counts
(`WordCounts`). The vectors come from a model's pieces table (qtsearch.encoders.pieces)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from qtsearch.encoders.pieces import LazyPieces, Pieces
from qtsearch.text.vocab import Vocab


class WordCounts:
    """Tokens an encoder has encoded, and how many were composed (ids past the table's
    `base` rows) or left <unk>: what a build reports. Reset by whoever reads a share."""

    def __init__(self) -> None:
        self.tokens = self.composed = self.unknown = 0

    def add(self, flat: np.ndarray, base: int) -> None:
        self.tokens += len(flat)
        self.composed += int(np.count_nonzero(flat >= base))
        self.unknown += int(np.count_nonzero(flat == 1))

    def reset(self) -> None:
        self.tokens = self.composed = self.unknown = 0

    def summary(self) -> dict[str, int]:
        return {"tokens": self.tokens, "composed": self.composed, "unknown": self.unknown}

    def line(self) -> str:
        """What a build prints: the share of its words it composed, and left unknown."""
        share = self.composed / max(self.tokens, 1)
        lost = self.unknown / max(self.tokens, 1)
        return (f"words: {share:.1%} of {self.tokens:,} composed from word pieces (outside "
                f"the model's vocabulary), {lost:.1%} unknown (<unk>)")


class GrowingTable:
    """A word table with rows appended for composed words. The model's rows are shared, never
    copied (every index an encoder serves has its own table over the same rows); the composed
    ones go to a buffer that grows four times over when full. The model's rows are kept as
    stored (fp16 for the shipped model): `take(ids)` gathers rows from both, as float32, so a
    query converts only its words' rows; `view()` is every row so far as one float32 array
    (for a build's sparse products): the model's rows and the composed ones copied into a
    joined array with room to grow, so a view after a few appends copies only those rows, not
    every row again (docs/speed.md, "Tokenising on both cores"); views handed out before stay
    valid for every id they held, a `set` row included (it starts a new joined array)."""

    #: Room for composed rows in a new table (a query process composes a few words; a build
    #: of SciFact's 5k abstracts composed ~20k).
    ROOM = 1024

    def __init__(self, table: np.ndarray, whole: Float32Rows | None = None):
        self.base = len(table)
        #: the model's rows as stored (fp16 or float32)
        self.base_rows = table
        #: the model's rows as float32 (the encoder's, converted once for every table over
        #: the same rows; without one, this table converts them itself)
        self.whole = whole if whole is not None else Float32Rows(table)
        self._extra = np.empty((self.ROOM, table.shape[1]), dtype=np.float32)
        self._count = self.base
        #: every row up to `_joined_rows` as float32, with room after them (`view`)
        self._joined: np.ndarray | None = None
        self._joined_rows = 0
        self._view_lock = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def append(self, row: np.ndarray) -> int:
        """Add a row; its id. Callers serialise appends (`OpenVocab` holds its lock)."""
        n = self._count - self.base
        if n == len(self._extra):  # each copy moves every composed row: few of them
            grown = np.empty((4 * n, self._extra.shape[1]), dtype=np.float32)
            grown[:n] = self._extra
            self._extra = grown
        self._extra[n] = row
        self._count += 1
        return self._count - 1

    def set(self, i: int, row: np.ndarray) -> None:
        """Replace composed row `i` (an id `append` gave)."""
        self._extra[i - self.base] = row
        self._joined = None

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The rows of `ids` (a new array)."""
        extra = self._extra  # read once: an append may replace it, keeping every row so far
        if not len(ids) or int(ids.max()) < self.base:
            return self.whole.take(ids)
        out = np.empty((len(ids), self.base_rows.shape[1]), dtype=np.float32)
        known = ids < self.base
        out[known] = self.whole.take(ids[known])
        out[~known] = extra[ids[~known] - self.base]
        return out

    def view(self) -> np.ndarray:
        count = self._count
        if count == self.base:
            return self.whole()
        with self._view_lock:
            joined, done = self._joined, self._joined_rows
            if joined is None or len(joined) < count:
                # room for as many rows again: a build's views grow shard by shard, each
                # copying the new rows only, and each growth copies every row (by half the
                # composed rows, 20 shards composing 267k words between them grew it 5 times
                # and copied 694k rows; doubling, 2 times and 176k); rows never written are
                # never given memory
                grown = np.empty((2 * count, self.base_rows.shape[1]), dtype=np.float32)
                if joined is None:
                    grown[: self.base] = self.base_rows  # whole()'s values, without building it
                    done = self.base
                else:
                    grown[:done] = joined[:done]
                joined = grown
            extra = self._extra  # read once: an append may replace it, keeping every row
            joined[done:count] = extra[done - self.base : count - self.base]
            self._joined, self._joined_rows = joined, count
        return joined[:count]


class Float32Rows:
    """Rows as float32: all of them converted when first asked for (`__call__`), then kept;
    before that, each row `take` gathers converted when first gathered and kept (float32 rows:
    themselves). numpy converts fp16 at about a nanosecond a value, so a hybrid query, which
    gathers its words' and its 30 hits' ~250 rows three times, spent ~0.2 ms converting rows
    it had converted before; a process keeps only the rows its queries met (~1 KB each)."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self._whole: np.ndarray | None = None
        #: row id -> its place in `_kept` (-1: not converted yet)
        self._slot = np.full(len(rows), -1, dtype=np.int32)
        self._kept = np.empty((0, rows.shape[1]), dtype=np.float32)
        self._kept_rows = 0
        self._lock = threading.Lock()

    def __call__(self) -> np.ndarray:
        if self._whole is None:  # two threads may both convert: the same values either way
            self._whole = np.ascontiguousarray(self.rows, dtype=np.float32)
        return self._whole

    def take(self, ids: np.ndarray) -> np.ndarray:
        """The float32 rows of `ids` (a new array)."""
        whole = self._whole
        if whole is not None or self.rows.dtype == np.float32:
            return (whole if whole is not None else self.rows)[ids]
        with self._lock:
            slots = self._slot[ids]
            missing = np.sort(ids[slots < 0])
            if len(missing):
                # each id once, not by np.unique: it imports numpy.ma, which a one-shot
                # query's start would pay for (tests/app/test_startup.py)
                new = missing[np.concatenate(([True], missing[1:] != missing[:-1]))]
                n = self._kept_rows
                if n + len(new) > len(self._kept):  # room for as many rows again, at most all
                    size = min(len(self.rows), 2 * (n + len(new)))
                    grown = np.empty((size, self.rows.shape[1]), np.float32)
                    grown[:n] = self._kept[:n]
                    self._kept = grown
                self._kept[n : n + len(new)] = self.rows[new]
                self._slot[new] = np.arange(n, n + len(new), dtype=np.int32)
                self._kept_rows = n + len(new)
                slots = self._slot[ids]
            return self._kept[slots]


class StoredRows(Protocol):
    """Rows stored for some lower-cased words (an index's corpus words), read on demand."""

    def row(self, word: str) -> np.ndarray | None: ...


class OpenVocab(Vocab):
    """A vocabulary that gives an unknown but composable word an id of its own, past the
    table's rows, its row the composed vector (in `table`); an uncomposable word stays <unk>.
    Lookups are the closed vocabulary's first (a known word, in any casing, keeps its id).
    With `stored` rows, a word that has one gets it instead of its composed row, when first
    met: as if `set_rows` had given it before any lookup, without reading every row at once.
    `table`: the model's rows as stored, `whole`: them as float32 (GrowingTable)."""

    def __init__(self, vocab: Vocab, pieces: Pieces | LazyPieces, table: np.ndarray,
                 stored: StoredRows | None = None,
                 whole: Float32Rows | None = None):
        # the closed vocabulary's maps, shared rather than rebuilt for every query encoder
        self.words, self.index, self.closed = vocab.words, vocab.index, vocab
        self.pieces = pieces
        self.table = GrowingTable(table, whole)
        #: composed word -> its id (None: no piece of it has a vector)
        self.composed: dict[str, int | None] = {}
        self.stored = stored
        self._lock = threading.Lock()

    @property
    def folded(self) -> dict[str, int]:
        """The closed vocabulary's (made there once, when first needed)."""
        return self.closed.folded

    def encode(self, tokens: list[str], max_len: int, fold_case: bool = False) -> list[int]:
        ids = super().encode(tokens, max_len, fold_case)
        if 1 in ids and tokens:
            ids = [self.extended(t) if i == 1 else i for i, t in zip(ids, tokens, strict=False)]
        return ids

    def extended(self, token: str,
                 composed: Mapping[str, np.ndarray | None] | None = None) -> int:
        """The id of an unknown token: its composed row's, or <unk>'s (1). `composed`: rows
        composed elsewhere (a build's tokenising workers), by lower-cased word, taken instead
        of composing here (the pieces are uncased: the same row)."""
        found = self.composed.get(token, 0)
        if found != 0:
            return found if found is not None else 1
        key = token.lower()  # the pieces are uncased: one row for every casing
        with self._lock:
            found = self.composed.get(key, 0)
            if found == 0:
                vector = self.stored.row(key) if self.stored is not None else None
                if vector is None:
                    vector = (composed[key] if composed is not None and key in composed
                              else self.pieces.compose(token))
                found = self.table.append(vector) if vector is not None else None
                self.composed[key] = found
            self.composed[token] = found
        return found if found is not None else 1

    def fresh(self, stored: StoredRows | None = None) -> OpenVocab:
        """A copy that has composed nothing yet, with these `stored` rows (none of this
        one's): for an index whose corpus words must not reach another index served by the
        same encoder."""
        return OpenVocab(self.closed, self.pieces, self.table.base_rows, stored, self.table.whole)

    def set_rows(self, words: list[str], rows: np.ndarray) -> None:
        """Give composed words (lower-cased, as `composed` keys them) these rows: a word
        composed already has its row replaced, in every casing; another gets a new id."""
        with self._lock:
            for word, row in zip(words, rows, strict=True):
                found = self.composed.get(word)
                if found is None:
                    self.composed[word] = self.table.append(row)
                else:
                    self.table.set(found, row)

    def knows(self, token: str) -> bool:
        """Whether `token` has a vector: a row of the table, or one composed from pieces."""
        return super().knows(token) or self.extended(token) != 1

    def is_composed(self, token: str) -> bool:
        """Whether `token` gets a composed vector (unknown to the table, with pieces)."""
        return not super().knows(token) and self.extended(token) != 1
