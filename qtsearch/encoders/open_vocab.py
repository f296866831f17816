"""The open vocabulary's tables: a closed vocabulary that hands composed words ids past its
rows (`OpenVocab`), the rows themselves (`GrowingTable`), and what a build counts
(`WordCounts`). The vectors come from a model's pieces table (qtsearch.encoders.pieces)."""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

from qtsearch.encoders.pieces import Pieces
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
    """A word table with rows appended for composed words: `view()` is every row so far (a
    numpy view; appending past the capacity copies into a buffer with four times the room
    for composed rows, and views handed out before keep the old buffer, which holds every row
    they can be asked for)."""

    #: Room for composed rows in a new table (a query process composes a few words; a build
    #: of SciFact's 5k abstracts composed ~20k).
    ROOM = 1024

    def __init__(self, table: np.ndarray):
        self.base = len(table)
        self._buffer = np.empty((self.base + self.ROOM, table.shape[1]), dtype=np.float32)
        self._buffer[: self.base] = table
        self._count = self.base

    def __len__(self) -> int:
        return self._count

    def append(self, row: np.ndarray) -> int:
        """Add a row; its id. Callers serialise appends (`OpenVocab` holds its lock)."""
        if self._count == len(self._buffer):  # each copy moves the whole table: few of them
            room = 4 * (len(self._buffer) - self.base)
            grown = np.empty((self.base + room, self._buffer.shape[1]), dtype=np.float32)
            grown[: self._count] = self._buffer[: self._count]
            self._buffer = grown
        self._buffer[self._count] = row
        self._count += 1
        return self._count - 1

    def view(self) -> np.ndarray:
        return self._buffer[: self._count]


class StoredRows(Protocol):
    """Rows stored for some lower-cased words (an index's corpus words), read on demand."""

    def row(self, word: str) -> np.ndarray | None: ...


class OpenVocab(Vocab):
    """A vocabulary that gives an unknown but composable word an id of its own, past the
    table's rows, its row the composed vector (in `table`); an uncomposable word stays <unk>.
    Lookups are the closed vocabulary's first (a known word, in any casing, keeps its id).
    With `stored` rows, a word that has one gets it instead of its composed row, when first
    met: as if `set_rows` had given it before any lookup, without reading every row at once."""

    def __init__(self, vocab: Vocab, pieces: Pieces, table: np.ndarray,
                 stored: StoredRows | None = None):
        # the closed vocabulary's maps, shared rather than rebuilt (49k words: ~30 ms)
        self.words, self.index, self.folded = vocab.words, vocab.index, vocab.folded
        self.pieces = pieces
        self.table = GrowingTable(table)
        #: composed word -> its id (None: no piece of it has a vector)
        self.composed: dict[str, int | None] = {}
        self.stored = stored
        self._lock = threading.Lock()

    def encode(self, tokens: list[str], max_len: int, fold_case: bool = False) -> list[int]:
        ids = super().encode(tokens, max_len, fold_case)
        if 1 in ids and tokens:
            ids = [self.extended(t) if i == 1 else i for i, t in zip(ids, tokens, strict=False)]
        return ids

    def extended(self, token: str) -> int:
        """The id of an unknown token: its composed row's, or <unk>'s (1)."""
        found = self.composed.get(token, 0)
        if found != 0:
            return found if found is not None else 1
        key = token.lower()  # the pieces are uncased: one row for every casing
        with self._lock:
            found = self.composed.get(key, 0)
            if found == 0:
                vector = self.stored.row(key) if self.stored is not None else None
                if vector is None:
                    vector = self.pieces.compose(token)
                found = self.table.append(vector) if vector is not None else None
                self.composed[key] = found
            self.composed[token] = found
        return found if found is not None else 1

    def fresh(self, stored: StoredRows | None = None) -> OpenVocab:
        """A copy that has composed nothing yet, with these `stored` rows (none of this
        one's): for an index whose corpus words must not reach another index served by the
        same encoder."""
        return OpenVocab(self, self.pieces, self.table.view()[: self.table.base], stored)

    def set_rows(self, words: list[str], rows: np.ndarray) -> None:
        """Give composed words (lower-cased, as `composed` keys them) these rows: a word
        composed already has its row replaced, in every casing; another gets a new id."""
        with self._lock:
            for word, row in zip(words, rows, strict=True):
                found = self.composed.get(word)
                if found is None:
                    self.composed[word] = self.table.append(row)
                else:  # a view taken now: an append may have moved the rows to a new buffer
                    self.table.view()[found] = row

    def knows(self, token: str) -> bool:
        """Whether `token` has a vector: a row of the table, or one composed from pieces."""
        return super().knows(token) or self.extended(token) != 1

    def is_composed(self, token: str) -> bool:
        """Whether `token` gets a composed vector (unknown to the table, with pieces)."""
        return not super().knows(token) and self.extended(token) != 1
