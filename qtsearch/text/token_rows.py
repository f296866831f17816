"""Rows of token ids held in one flat array: what a corpus of a million sentences keeps in
memory instead of a Python list per sentence (four bytes an id instead of a pointer to a
Python int, and no list object a row).

Row i is `flat[starts[i]:ends[i]]`, a view. A subset of rows (`take`) shares the flat array,
so pairs of sentences, and a task's training and validation split of them, cost two offsets a
row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import overload

import numpy as np

#: Rows encoded at once (`TokenRows.encoded`).
CHUNK = 1 << 16


class TokenRows(Sequence[np.ndarray]):
    def __init__(self, flat: np.ndarray, starts: np.ndarray, ends: np.ndarray):
        self.flat, self.starts, self.ends = flat, starts, ends

    @classmethod
    def from_offsets(cls, flat: np.ndarray, offsets: np.ndarray) -> TokenRows:
        """Consecutive rows: row i spans offsets[i]..offsets[i + 1]."""
        return cls(flat, offsets[:-1], offsets[1:])

    @classmethod
    def from_rows(cls, rows: Iterable[np.ndarray], dtype: type = np.int32) -> TokenRows:
        parts = [np.asarray(r, dtype=dtype) for r in rows]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        flat = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
        return cls.from_offsets(flat, offsets)

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, i: slice) -> TokenRows: ...

    def __getitem__(self, i: int | slice) -> np.ndarray | TokenRows:
        if isinstance(i, slice):  # rows i.start..i.stop over the same flat array
            return TokenRows(self.flat, self.starts[i], self.ends[i])
        return self.flat[self.starts[i] : self.ends[i]]

    def joined(self) -> np.ndarray:
        """Every row's ids, end to end: a view where the rows lie so in the flat array
        (`from_offsets`), else a copy."""
        if not len(self):
            return self.flat[:0]
        if np.array_equal(self.starts[1:], self.ends[:-1]):
            return self.flat[self.starts[0] : self.ends[-1]]
        return np.concatenate([self.flat[a:b] for a, b in zip(self.starts.tolist(),
                                                               self.ends.tolist(), strict=True)])

    def take(self, rows: Sequence[int] | np.ndarray) -> TokenRows:
        """These rows, in this order, over the same flat array."""
        return TokenRows(self.flat, self.starts[rows], self.ends[rows])

    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def row_of_each(self) -> np.ndarray:
        """For rows laid end to end over the whole flat array (`from_offsets`): the row each
        flat position belongs to."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths())

    def encoded(self, lookup: np.ndarray, max_len: int) -> TokenRows:
        """Each row's first `max_len` ids mapped through `lookup`, an empty row becoming [1]
        (<unk>): what `Vocab.encode` makes of a sentence, for rows of corpus-type ids and a
        lookup of each type's vocabulary id."""
        offsets = self.cut_offsets(max_len)
        out = np.ones(int(offsets[-1]), dtype=np.int32)
        for a in range(0, len(self), CHUNK):  # a chunk's positions at once: 8 bytes a token
            source, place = self.kept_places(a, min(a + CHUNK, len(self)), max_len, offsets)
            out[place] = lookup[self.flat[source]]
        return TokenRows.from_offsets(out, offsets)

    def cut_offsets(self, max_len: int) -> np.ndarray:
        """Where each row cut to its first `max_len` ids starts when the rows are laid end to
        end, an empty row taking one place (its <unk>), then where the last one ends."""
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(np.maximum(np.minimum(self.lengths(), max_len), 1), out=offsets[1:])
        return offsets

    def kept_places(self, a: int, b: int, max_len: int, offsets: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Of rows a..b, each of a row's first `max_len` ids: its place in `flat`, and its
        place among the rows cut so and laid out by `offsets` (`cut_offsets`)."""
        n = np.minimum(self.ends[a:b] - self.starts[a:b], max_len)
        row = np.repeat(np.arange(a, b, dtype=np.int64), n)
        within = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
        return self.starts[row] + within, offsets[row] + within
