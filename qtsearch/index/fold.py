"""Identical vectors folded onto one node of a graph index.

Why: a mean-of-words model gives every sentence of the same words the same vector, and all
sentences of words it does not know one vector, so a real corpus holds many copies of some
vectors ("CODICIL.", "CHARADE.", "Heine.", "* * * * *"). In an HNSW graph the copies fill each
other's neighbour lists (at distance 0) and become islands a search cannot reach, which capped
recall however large efSearch was (docs/benchmarks.md, "Query latency"). So a
graph holds each distinct vector once (equal within SAME), and `Fold` maps the rows (sentence
ids) to their node: a node found is expanded to its rows, all with the node's score.

Stored as `fold.safetensors` beside the index (the node of every row), never pickle. An index
without the file has one node per row.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from qtsearch.core.config import with_umask
from qtsearch.core.errors import UnusableIndex

FOLD_FILE = "fold.safetensors"
#: Vectors whose components all differ by at most this are one vector. Not 0: the same
#: sentence encoded in another batch (a GRU's padding, the mean model's query path against
#: its build path) differs in the last bits of float rounding; far below any difference
#: of meaning, and below the 1e-5 within which recall counts scores as ties.
SAME = 1e-5
#: Cell size of the two grids whose cell numbers key a vector (the second offset by half a
#: cell): near-copies fall into one cell of at least one grid unless they straddle a border
#: in both (p ~ 1e-4 at 5e-7 apart over 256 dims). A key shared by different vectors costs
#: a node (the vectors are compared before folding), never a wrong answer.
CELL = 2.0 ** -10


@functools.cache
def _multipliers() -> np.ndarray:
    """One random odd multiplier per dimension: a key is the sum of cell numbers times these
    (made when a build first keys vectors: a query never imports numpy.random)."""
    return np.random.default_rng(20261123).integers(
        0, 1 << 63, size=4096, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


#: Rows keyed at a time (50k x 256 dims take 100 MB of temporaries).
_CHUNK = 50_000


def vector_keys(x: np.ndarray, offset: float = 0.0) -> np.ndarray:
    """A 64-bit key per row of `x` [n, d]: its cell in the grid of CELL shifted by
    `offset` cells."""
    mult = np.resize(_multipliers(), x.shape[1])
    out = np.empty(x.shape[0], dtype=np.uint64)
    for lo in range(0, x.shape[0], _CHUNK):
        cells = np.floor(np.asarray(x[lo:lo + _CHUNK], dtype=np.float64) / CELL + offset)
        out[lo:lo + _CHUNK] = (cells.astype(np.int64).view(np.uint64) * mult).sum(
            axis=1, dtype=np.uint64)
    return out


class Fold:
    """The node of each row; rows of a node in row order."""

    def __init__(self, node_of_row: np.ndarray):
        self.node_of_row = np.asarray(node_of_row, dtype=np.int64)
        self._rows: np.ndarray | None = None
        self._start: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return len(self.node_of_row)

    @property
    def nodes(self) -> int:
        return int(self.node_of_row.max()) + 1 if self.rows else 0

    def prepare(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows of each node (rows sorted by node, and where each node's start): built on
        first use, or ahead of it by a warm-up (a pass over every row)."""
        if self._rows is None or self._start is None:
            self._rows = np.argsort(self.node_of_row, kind="stable")
            self._start = np.searchsorted(self.node_of_row[self._rows],
                                          np.arange(self.nodes + 1))
        return self._rows, self._start

    def expand(self, scores: np.ndarray, nodes: np.ndarray,
               k: int) -> tuple[np.ndarray, np.ndarray]:
        """Node results [nq, k'] as row results [nq, k]: each node's rows in turn, with its
        score, until k rows; -1 pads a query with fewer."""
        rows, start = self.prepare()
        out_s = np.full((len(nodes), k), -np.inf, dtype=np.float32)
        out_i = np.full((len(nodes), k), -1, dtype=np.int64)
        for q, (sr, nr) in enumerate(zip(scores, nodes, strict=True)):
            nr = nr[nr >= 0]
            got = [rows[start[n]:min(start[n + 1], start[n] + k)] for n in nr]
            take = np.concatenate(got)[:k] if got else np.empty(0, np.int64)
            counts = [len(g) for g in got]
            out_i[q, :len(take)] = take
            out_s[q, :len(take)] = np.repeat(sr[:len(nr)], counts)[:k]
        return out_s, out_i

    def save(self, folder: str | os.PathLike) -> None:
        """fold.safetensors, written via a temporary name and a rename."""
        from safetensors.numpy import save_file

        path = Path(folder) / FOLD_FILE
        tmp = path.with_name(path.name + ".tmp")
        save_file({"node_of_row": self.node_of_row}, str(tmp))
        with_umask(tmp)
        os.replace(tmp, path)

    @classmethod
    def load(cls, folder: str | os.PathLike, nodes: int) -> Fold | None:
        """The fold saved in `folder` for a graph of `nodes` nodes, or None where there is none
        (one node per row); UnusableIndex for a file that is not such a fold."""
        path = Path(folder) / FOLD_FILE
        if not path.is_file():
            return None
        from safetensors.numpy import load_file

        try:
            node_of_row = load_file(str(path))["node_of_row"]
        except Exception as e:  # safetensors raises its own error types, KeyError
            raise UnusableIndex(f"{path}: corrupt or unreadable fold ({e})") from e
        fold = cls(node_of_row)
        if node_of_row.ndim != 1 or (fold.rows and (int(node_of_row.min()) < 0
                                                    or fold.nodes != nodes)):
            raise UnusableIndex(f"{path}: does not match the index beside it ({fold.nodes:,} "
                              f"nodes against {nodes:,}); rebuild the index")
        return fold


class Folder:
    """Assigns the rows added to a graph to nodes: a new vector gets the next node, a copy of
    one already held gets that one's node. `stored(nodes)` reads held vectors back (for the
    check that a shared key is a real copy)."""

    def __init__(self, stored: Callable[[np.ndarray], np.ndarray],
                 existing: Fold | None = None, held: Iterable[np.ndarray] = ()):
        self.stored = stored
        self.by_key: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self.parts: list[np.ndarray] = [] if existing is None else [existing.node_of_row]
        self._fold: Fold | None = existing  # the fold of `parts`, until the next assign
        self.next_node = 0
        for vectors in held:  # the nodes of an index being added to, in node order
            for keys in zip(*self._keys(vectors), strict=True):
                self._register(keys, self.next_node)
                self.next_node += 1

    @staticmethod
    def _keys(x: np.ndarray) -> tuple[list[int], list[int]]:
        return vector_keys(x).tolist(), vector_keys(x, 0.5).tolist()

    def _register(self, keys: tuple[int, int], node: int) -> None:
        for table, key in zip(self.by_key, keys, strict=True):
            table.setdefault(key, node)

    def assign(self, x: np.ndarray) -> np.ndarray:
        """The node of each row of `x` [n, d] (float32); returns the rows that are new nodes,
        in node order: the rows to add to the graph."""
        nodes = np.empty(len(x), dtype=np.int64)
        new: list[int] = []
        start = self.next_node
        for row, keys in enumerate(zip(*self._keys(x), strict=True)):
            node = self.by_key[0].get(keys[0])
            if node is None:
                node = self.by_key[1].get(keys[1])
            if node is None:
                node = self.next_node
                self.next_node += 1
                self._register(keys, node)
                new.append(row)
            nodes[row] = node
        # A shared key must be a near-copy: compared with the batch's row of a new node, or
        # with the vector the graph holds; a vector that is not gets a node of its own.
        shared = np.setdiff1d(np.arange(len(x)), new, assume_unique=True)
        if len(shared):
            ref = np.empty((len(shared), x.shape[1]), dtype=np.float32)
            held = nodes[shared] < start
            ref[~held] = x[np.asarray(new, dtype=np.int64)[nodes[shared][~held] - start]]
            if held.any():
                ref[held] = self.stored(nodes[shared][held])
            far = np.abs(ref - x[shared]).max(axis=1) > SAME
            for row in shared[far].tolist():
                nodes[row] = self.next_node
                self.next_node += 1
                new.append(row)
        self.parts.append(nodes)
        self._fold = None
        return np.asarray(new, dtype=np.int64)

    @property
    def rows(self) -> int:
        return sum(len(p) for p in self.parts)

    def fold(self) -> Fold:
        """The fold of every row assigned so far: one object until the next assign, so the
        build's tuning, writing and report share it (and its rows indexed by node)."""
        if self._fold is None:
            self._fold = Fold(np.concatenate(self.parts) if self.parts else
                              np.empty(0, np.int64))
        return self._fold
