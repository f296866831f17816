"""Sentence metadata in SQLite: one row per vector, keyed by the faiss id.

The faiss id of a vector is its row id here, so a hit maps to its text, source, line, document
and position with one primary-key lookup. Plain `sqlite3`: bulk inserts are one `executemany`
in one transaction, and a query imports nothing beyond the standard library. WAL mode: readers
(the query layer) never block on a writer (`add`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core import budget
from qtsearch.core.disk import writing
from qtsearch.core.errors import OutputError, UnusableIndex
from qtsearch.index.failures import sqlite_failure
from qtsearch.index.schema import (
    COLUMNS,
    CREATE_INDEXES,
    CREATE_TABLE,
    FTS_CREATE,
    FTS_TABLE,
    INSERT,
    INTEGER_COLUMNS,
    Row,
    fts_phrase,
)

#: How much of a read-only database SQLite may map into memory (address space, not RAM).
_MMAP_BYTES = 1 << 40
#: Rows per fetch when streaming the table out (Parquet export): bounded memory.
_CHUNK = 50_000
#: SQLite limits bound parameters per statement (32766 in modern builds): chunk `IN (...)`.
_MAX_IN = 30_000


def _connect(path: Path, readonly: bool) -> sqlite3.Connection:
    # A finished index never changes in place (writers swap in a new folder), so a reader
    # opens it immutable: no -wal/-shm files beside it, read-only media work, and its one
    # connection keeps reading the file it opened after a rebuild took its place.
    mode = "ro&immutable=1" if readonly else "rwc"
    conn = sqlite3.connect(f"file:{path.resolve().as_posix()}?mode={mode}", uri=True,
                           check_same_thread=False, isolation_level=None)  # BEGIN is explicit
    if readonly:  # pages read through a memory map, not copied in by a read() each
        conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
    else:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextlib.contextmanager
def _in_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One transaction around the block: committed after it, rolled back when it fails."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


class MetadataStore:
    """The `sentences` table of one index (`meta.sqlite`)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool):
        self.path = path
        self._conn = conn
        self.readonly = readonly
        self._lock = threading.RLock()  # see _connect
        #: The columns of this database in COLUMNS order: indexes built before the article
        #: columns (title, url, doc_id, section) lack them and are read without them.
        self.fields = tuple(c for c in COLUMNS if c in self.columns())
        self._select = f"SELECT {', '.join(self.fields)} FROM sentences"

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """The store's one connection, one thread at a time: SQLite shares a connection
        between threads safely only where it was built serialized (sqlite3.threadsafety 3)."""
        with self._lock, self._failures():
            yield self._conn

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one transaction (`_in_transaction`)."""
        with self._connect() as conn, _in_transaction(conn):
            yield conn

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """A full disk or a damaged database as one line (qtsearch.index.failures)."""
        try:
            yield
        except Exception as e:
            known = sqlite_failure(self.path, e)
            if known is None:
                raise
            raise known from e

    @classmethod
    def create(cls, path: str | os.PathLike) -> MetadataStore:
        """A new, empty store; refuses to reuse an existing file (a stale half-written one
        must be removed by the caller, who knows whether it is stale)."""
        p = Path(path)
        if p.exists():
            raise OutputError(f"{p}: metadata database already exists")
        conn = None
        try:
            conn = _connect(p, readonly=False)
            with _in_transaction(conn):  # never a table without its indexes
                for statement in (CREATE_TABLE, *CREATE_INDEXES):
                    conn.execute(statement)
        except (sqlite3.Error, OSError) as e:  # an unwritable folder, a full disk
            if conn is not None:
                conn.close()
            known = sqlite_failure(p, e)
            if isinstance(known, OutputError):
                raise known from e
            why = (str(e).splitlines() or [type(e).__name__])[0]
            raise OutputError(f"{p}: cannot create the metadata database ({why})") from e
        return cls(p, conn, readonly=False)

    @classmethod
    def open(cls, path: str | os.PathLike, readonly: bool = True) -> MetadataStore:
        """Open an existing store; a missing or corrupt file raises UnusableIndex."""
        p = Path(path)
        if not p.is_file():
            raise UnusableIndex(f"{p}: metadata database is missing")
        conn = None
        try:
            conn = _connect(p, readonly=readonly)
            names = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        except (sqlite3.Error, OSError) as e:
            if conn is not None:
                conn.close()
            known = None if readonly else sqlite_failure(p, e)
            if isinstance(known, OutputError):  # a writer's: a full disk, a read-only file
                raise known from e
            why = (str(e).splitlines() or [type(e).__name__])[0]
            raise UnusableIndex(f"{p}: not a readable SQLite database ({why})") from e
        if "sentences" not in names:
            conn.close()
            raise UnusableIndex(f"{p}: no `sentences` table (not a qtsearch metadata database)")
        store = cls(p, conn, readonly=readonly)
        if not readonly:
            store._add_missing_columns()
        return store

    def _add_missing_columns(self) -> None:
        """Give a database from before the article columns those columns (NULL in its rows),
        so that rows of any corpus can be added to it."""
        missing = [c for c in COLUMNS if c not in self.fields]
        if not missing:
            return
        with self._transaction() as conn:
            for name in missing:
                conn.execute(f"ALTER TABLE sentences ADD COLUMN {name} TEXT")
            for statement in CREATE_INDEXES:
                conn.execute(statement)
        self.fields = COLUMNS
        self._select = f"SELECT {', '.join(self.fields)} FROM sentences"

    def insert_many(self, rows: Iterable[Row]) -> int:
        """Insert rows in one transaction (all or nothing); returns how many were inserted.
        A row may stop after `position`: its article columns are then NULL."""
        if self.readonly:
            raise OutputError(f"{self.path}: opened read-only, cannot insert")
        width = len(COLUMNS)
        data = [r if len(r) == width else (*r, *(None,) * (width - len(r))) for r in rows]
        if not data:
            return 0
        # executemany binds the positional tuples as they are: no dict a row
        with self._transaction() as conn:
            conn.executemany(INSERT, data)
        return len(data)

    def count(self) -> int:
        with self._connect() as conn:
            if not self.readonly:
                return int(conn.execute("SELECT count(*) FROM sentences").fetchone()[0])
            # counted through SQLite's own page cache, not the memory map: each fault in the
            # map also maps its neighbours (the kernel's fault-around), and the small index
            # counted lies among the table's pages, so the count mapped most of the file
            conn.execute("PRAGMA mmap_size=0")
            try:
                return int(conn.execute("SELECT count(*) FROM sentences").fetchone()[0])
            finally:
                conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")

    def max_id(self) -> int:
        """Largest id stored, -1 when empty (the next appended row gets max_id + 1)."""
        with self._connect() as conn:
            value = conn.execute("SELECT max(id) FROM sentences").fetchone()[0]
        return -1 if value is None else int(value)

    def max_doc(self) -> int:
        """Largest document number, -1 when empty (appended documents continue after it)."""
        with self._connect() as conn:
            value = conn.execute("SELECT max(doc) FROM sentences").fetchone()[0]
        return -1 if value is None else int(value)

    def get(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Rows by id (ids not found are simply absent from the result)."""
        wanted = sorted({int(i) for i in ids if int(i) >= 0})
        found: dict[int, dict[str, Any]] = {}
        # one statement a chunk, rows read as plain tuples
        with self._connect() as conn:
            chunks = [wanted[s : s + _MAX_IN] for s in range(0, len(wanted), _MAX_IN)]
            wheres = [f"id IN ({', '.join('?' * len(chunk))})" for chunk in chunks]
            for where, chunk in zip(wheres, chunks, strict=True):
                _charge(conn, where, tuple(chunk))
            for where, chunk in zip(wheres, chunks, strict=True):
                for row in conn.execute(f"{self._select} WHERE {where}", tuple(chunk)):
                    found[row[0]] = dict(zip(self.fields, row, strict=True))
        return found

    def context(self, doc: int, position: int, window: int) -> list[dict[str, Any]]:
        """The sentences of `doc` within `window` positions of `position`, in order."""
        where, params = "doc = ? AND position BETWEEN ? AND ?", (doc, position - window,
                                                                   position + window)
        with self._connect() as conn:
            _charge(conn, where, params)
            rows = conn.execute(f"{self._select} WHERE {where} ORDER BY position, id", params)
            return [dict(zip(self.fields, r, strict=True)) for r in rows]

    def iter_rows(self, chunk: int = _CHUNK) -> Iterator[list[Row]]:
        """All rows in id order, `chunk` at a time (keyset pagination: flat memory)."""
        with self._connect() as conn:
            cur = conn.execute(f"{self._select} ORDER BY id")
            while rows := cur.fetchmany(chunk):
                yield rows

    def to_parquet(self, path: str | os.PathLike) -> int:
        """Write the whole table to Parquet (same columns and types); returns the row count.

        Written to a temporary name and renamed, so a reader never sees half a file.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([(name, pa.int64() if name in INTEGER_COLUMNS else pa.string())
                            for name in self.fields])
        out = Path(path)
        tmp = out.with_name(out.name + ".tmp")
        n = 0
        try:
            with writing(out, tmp), pq.ParquetWriter(tmp, schema) as writer:
                for rows in self.iter_rows():
                    cols = list(zip(*rows, strict=True))
                    writer.write_table(pa.table(
                        {name: pa.array(col, type=schema.field(name).type)
                         for name, col in zip(self.fields, cols, strict=True)}, schema=schema))
                    n += len(rows)
                if n == 0:
                    writer.write_table(schema.empty_table())
            os.replace(tmp, out)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise OutputError(f"{out}: cannot write Parquet ({e.strerror or e})") from e
        return n

    # -- full-text table (write side): built at build time, on `add` and in derived builds ---
    def fts_create(self) -> None:
        """Create the FTS5 table `sentences_fts` over `sentences.text` (idempotent). External
        content: it stores only the inverted index and reads texts from `sentences` by id, so
        a lexical hit's rowid is the vector id and the texts are not stored twice."""
        if self.readonly:
            raise OutputError(f"{self.path}: opened read-only, cannot create the FTS table")
        with self._transaction() as conn:
            conn.execute(FTS_CREATE)

    def fts_fill(self, first_id: int = 0) -> int:
        """Index the texts of the rows with id >= `first_id` (one transaction); returns how
        many rows were indexed. `add` passes its first new id, so old rows are not redone."""
        if self.readonly:
            raise OutputError(f"{self.path}: opened read-only, cannot fill the FTS table")
        with self._transaction() as conn:
            cur = conn.execute(
                f"INSERT INTO {FTS_TABLE}(rowid, text) SELECT id, text FROM sentences "
                f"WHERE id >= ? ORDER BY id", (int(first_id),))
            return int(cur.rowcount)

    def has_fts(self) -> bool:
        """Whether the full-text table exists (False on indexes built before it)."""
        with self._connect() as conn:
            return conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                (FTS_TABLE,)).fetchone() is not None

    def fts_count(self) -> int:
        """Rows in the full-text index, from its own per-row table (a table damaged or cut
        short shows here, not in `count`)."""
        with self._connect() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {FTS_TABLE}_docsize").fetchone()[0])

    def checkpoint(self) -> None:
        """Fold the WAL into the main file, so a finished index is one self-contained file."""
        with self._connect() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MetadataStore:
        return self

    def __exit__(self, kind: object, error: BaseException | None, tb: object) -> None:
        self.close()
        known = None if error is None else sqlite_failure(self.path, error)
        if known is not None:  # e.g. the disk filled up while a build or add wrote rows
            raise known from error

    # -- read side of the full-text table (for the query layer's lexical leg) ------------------

    def columns(self) -> list[str]:
        """The columns of the `sentences` table (a filter may name any of them)."""
        with self._connect() as conn:
            return [r[1] for r in conn.execute("PRAGMA table_info(sentences)")]

    def ids_where(self, clause: str, params: Sequence[Any]) -> np.ndarray:
        """Sorted ids of the rows matching an SQL condition on `sentences` (built by the query
        layer from column names it checked against `columns()`; values are bound)."""
        with self._connect() as conn:
            rows = conn.execute(f"SELECT id FROM sentences WHERE {clause} ORDER BY id",
                                        tuple(params)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def distinct(self, column: str, clause: str = "", params: Sequence[Any] = ()) -> list[Any]:
        """The distinct values of `column` among the rows matching `clause` (as in
        `ids_where`; empty: every row), NULL left out."""
        if column not in self.fields:
            raise ValueError(f"no column {column!r}")
        sql = (f'SELECT DISTINCT "{column}" FROM sentences WHERE "{column}" IS NOT NULL'
               + (f" AND ({clause})" if clause else ""))
        with self._connect() as conn:
            return [r[0] for r in conn.execute(sql, tuple(params))]

    def term_rows(self, term: str, cap: int) -> int:
        """How many rows hold `term`, counted up to `cap`: a bounded-cost test of whether a
        word is too frequent to search (fts5vocab counts a whole doclist, slow for a frequent
        word; this stops at `cap`)."""
        sql = (f"SELECT count(*) FROM (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} "
               "MATCH ? LIMIT ?)")
        with self._connect() as conn:
            return int(conn.execute(sql, (fts_phrase(term), cap)).fetchone()[0])

    def term_counts(self, min_rows: int = 0) -> dict[str, int]:
        """Terms held by more than `min_rows` rows, with their row counts: one pass over the
        whole full-text index (docs/benchmarks.md, "Query latency"), for a warm-up thread."""
        with self._connect() as conn:
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{FTS_TABLE}_terms "
                                 f"USING fts5vocab(main, {FTS_TABLE}, row)")
            rows = conn.execute(f"SELECT term, doc FROM temp.{FTS_TABLE}_terms "
                                        "WHERE doc > ?", (min_rows,)).fetchall()
        return {str(t): int(n) for t, n in rows}

    def bm25(self, match: str, k: int, clause: str = "", params: Sequence[Any] = (),
             ranked: bool = True) -> list[tuple[int, float]]:
        """(id, BM25 score) of the best `k` rows for an FTS5 query, higher is better, limited
        to rows matching `clause` (an SQL condition on `sentences` as in `ids_where`).
        `ranked=False` scores only the first `k` matches in id order (bounded cost where the
        query matches too many rows to rank)."""
        join = f" JOIN sentences ON sentences.id = {FTS_TABLE}.rowid" if clause else ""
        sql = (f"SELECT {FTS_TABLE}.rowid, bm25({FTS_TABLE}) FROM {FTS_TABLE}{join} "
               f"WHERE {FTS_TABLE} MATCH ?{f' AND ({clause})' if clause else ''}"
               f"{f' ORDER BY bm25({FTS_TABLE})' if ranked else ''} LIMIT ?")
        with self._connect() as conn:
            rows = conn.execute(sql, (match, *params, k)).fetchall()
        hits = [(int(i), -float(s)) for i, s in rows]  # FTS5's bm25 is negated: lower = better
        return hits if ranked else sorted(hits, key=lambda h: -h[1])


def _charge(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> None:
    """Charge the running request's budget (qtsearch.core.budget) with the text of the rows
    `where` selects, measured by SQLite before any of it is read into Python (SQLite 3.40's
    length() still loads a long text into its own buffer to count it: once, not the dozen
    copies a hit, its fold and its JSON make); nothing is measured outside a request."""
    spent = budget.current()
    if spent is not None:
        chars = conn.execute(f"SELECT total(length(text)) FROM sentences WHERE {where}",
                             params).fetchone()[0]
        spent.charge(int(chars or 0))
