"""Rows → BM25 postings (qtsearch.index.bm25): each chunk of rows analysed into its terms and
(term, row, tf) triples, and the chunks' terms numbered in one vocabulary.

Analysing is Python (the word pattern, the term of each distinct word) and most of a build's
BM25 cost, so a big store is analysed by worker processes, one per core, each reading its
chunks from the store itself (no text is sent); the chunks come back in row order and are
numbered here as they would be one after the other, so the files are the same either way
(docs/lexical.md, "Where it lives").
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from qtsearch.core.batching import chunks
from qtsearch.core.errors import Stopped, UnusableIndex
from qtsearch.core.processes import worker_pool
from qtsearch.text.terms import Analyzer

#: Rows analysed at a time: bounds the memory of one chunk's words.
CHUNK = 50_000
#: Stores of fewer rows are analysed in this process: starting a worker (an interpreter,
#: numpy, the stemmer) costs about what it saves on this many.
PARALLEL_ROWS = 200_000

_analyzer: Analyzer | None = None  # a worker's, kept for every chunk it analyses


@dataclass
class ChunkTerms:
    """One chunk's postings: its distinct terms (a term's local id is its place here), its
    (local term, row) pairs ascending with their tfs, and its rows' lengths in terms."""

    terms: list[str]
    pairs: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray


def analyse(chunk: list[tuple[int, str]], analyzer: Analyzer, first_row: int) -> ChunkTerms:
    """The terms of rows (id, text), whose ids must run on from `first_row` without gaps."""
    ids = [i for i, _ in chunk]
    if not ids or ids[0] != first_row or ids[-1] != first_row + len(ids) - 1:
        raise UnusableIndex(f"BM25 index: rows must have consecutive ids from {first_row}")
    # the per-token work stays in C (one translation, arrow's split and dictionary): Python
    # loops over the tokens made the build several times slower
    words = Analyzer.word_table([text for _, text in chunk])
    local: dict[str, int] = {}
    term_of = np.fromiter((-1 if t is None else local.setdefault(t, len(local))
                           for t in analyzer.terms_of(words.distinct)), dtype=np.int64,
                          count=len(words.distinct))
    tids = term_of[words.place]
    row = np.repeat(np.arange(len(ids), dtype=np.int64), words.counts)
    keep = tids >= 0  # stop-words out
    tids, row = tids[keep], row[keep]
    pairs, counts = np.unique((tids << 32) | row, return_counts=True)
    tfs = np.minimum(counts, np.iinfo(np.uint16).max).astype(np.uint16)
    return ChunkTerms(list(local), pairs, tfs,
                      np.bincount(row, minlength=len(ids)).astype(np.int32))


def invert(parts: Iterable[ChunkTerms], vocab: dict[str, int], first_row: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(term ids, rows, tfs) of every (term, row) pair of the chunks, in row order, rows
    ascending within a term, and the rows' lengths; new terms are added to `vocab`. Kept in
    int32 and uint16 (a million Wikipedia sentences hold ~15M pairs)."""
    term_parts, row_parts, tf_parts, length_parts = [], [], [], []
    start = first_row
    for part in parts:
        number = np.fromiter((vocab.setdefault(t, len(vocab)) for t in part.terms),
                             dtype=np.int32, count=len(part.terms))
        term_parts.append(number[part.pairs >> 32])
        row_parts.append(((part.pairs & 0xFFFFFFFF) + start).astype(np.int32))
        tf_parts.append(part.tfs)
        length_parts.append(part.lengths)
        start += len(part.lengths)
    if not length_parts:
        empty = np.zeros(0, dtype=np.int32)
        return empty, empty, np.zeros(0, dtype=np.uint16), empty
    return (np.concatenate(term_parts), np.concatenate(row_parts), np.concatenate(tf_parts),
            np.concatenate(length_parts))


def analysed(rows: Iterable[tuple[int, str]], first_row: int) -> Iterator[ChunkTerms]:
    """The chunks of rows (id, text) in id order from `first_row`, analysed here."""
    analyzer = Analyzer()
    for chunk in chunks(rows, CHUNK):
        yield analyse(chunk, analyzer, first_row)
        first_row += len(chunk)


def analysed_store(db: Path, first_row: int, count: int, workers: int) -> Iterator[ChunkTerms]:
    """The chunks of a metadata store's `count` rows from `first_row` on, analysed by
    `workers` processes reading the store themselves, in row order."""
    starts = range(first_row, first_row + count, CHUNK)
    with worker_pool(workers) as pool:
        yield from pool.map(_analyse_range, [db] * len(starts), starts,
                            [min(s + CHUNK, first_row + count) for s in starts])


def stoppable(parts: Iterable[ChunkTerms], stop: threading.Event | None) -> Iterator[ChunkTerms]:
    """`parts`, raising Stopped before the next one once `stop` is set."""
    for part in parts:
        Stopped.check(stop)
        yield part


def store_count(db: Path, first_id: int) -> int:
    """How many rows a metadata store holds from `first_id` on."""
    with closing(_read_only(db)) as conn:
        return conn.execute("SELECT COUNT(*) FROM sentences WHERE id >= ?",
                            (first_id,)).fetchone()[0]


def store_rows(db: Path, first_id: int, end: int | None = None) -> Iterator[tuple[int, str]]:
    """(id, text) of a metadata store's rows from `first_id` on (before `end`), in id order."""
    conn = _read_only(db)
    try:
        if end is None:
            yield from conn.execute("SELECT id, text FROM sentences WHERE id >= ? ORDER BY id",
                                    (first_id,))
        else:
            yield from conn.execute("SELECT id, text FROM sentences WHERE id >= ? AND id < ? "
                                    "ORDER BY id", (first_id, end))
    finally:
        conn.close()


def _read_only(db: Path) -> sqlite3.Connection:
    """A connection of its own to a store, read-only (the builder's may be mid-transaction)."""
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)


def _analyse_range(db: Path, start: int, end: int) -> ChunkTerms:
    global _analyzer
    if _analyzer is None:
        _analyzer = Analyzer()
    terms = analyse(list(store_rows(db, start, end)), _analyzer, start)
    if len(terms.lengths) != end - start:
        raise UnusableIndex(f"BM25 index: rows must have consecutive ids from {start}")
    return terms
