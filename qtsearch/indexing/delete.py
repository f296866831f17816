"""`qtsearch delete`: take rows out of an index (by record id or by a filter), and the rewrite
that `add --upsert` shares, on a copy that replaces the index only when complete.

Row ids are faiss ids, 0..n-1 without gaps (every reader relies on that), so the rows kept are
renumbered in order and every part of the index is written again from them: the vectors
without re-embedding (qtsearch.index.compact), the metadata database fresh (no free pages
left behind; with the full-text table of an index built with one), the BM25 files, the
Parquet copy; then the manifest, which records every file's checksum. Document numbers,
sources and lines stay as they were.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from qtsearch.core.errors import UnusableIndex, UsageError
from qtsearch.index import bm25
from qtsearch.index.compact import keep_rows
from qtsearch.index.index_folder import swap_in, working_copy
from qtsearch.index.integrity import counts, require_whole
from qtsearch.index.lock import real_folder, writer_lock
from qtsearch.index.manifest import Manifest, compose_manifest, now, read_manifest, write_manifest
from qtsearch.index.names import INDEX_FILE, META_FILE, PARQUET_FILE
from qtsearch.index.store import MetadataStore

#: Record ids per SQL statement (SQLite bounds the values one statement binds).
IDS_PER_QUERY = 10_000


class Condition(Protocol):
    """An SQL condition on the `sentences` table with its bound values and its text as the
    user wrote it (qtsearch.search.filters.Filter: made there, where columns are checked)."""

    clause: str
    params: tuple[Any, ...]
    text: str


@dataclass
class DeleteResult:
    path: Path
    deleted: int
    count: int
    seconds: float
    note: str = ""  # what matched nothing, when something did not


def delete_from_index(index_dir: str | os.PathLike, doc_ids: Sequence[str] = (),
                      where: Condition | None = None, wait: float | None = 0.0,
                      on_note: Callable[[str], None] | None = None) -> DeleteResult:
    """Delete the rows of the records `doc_ids` (rows whose doc_id is one of them) that match
    `where` (both given: both must hold), under the writer lock (`wait`, `on_note` as in
    `add_to_index`). Nothing matched: the index stays as it is and `note` says so. Every row
    matched: UsageError, since an index cannot be empty (build a new one instead)."""
    folder = real_folder(index_dir)  # a link: the folder it points to
    if not doc_ids and not where:
        raise UsageError("delete: say which rows: record ids (--doc-id ID; doc_ids over "
                         "HTTP) or a filter (--where COLUMN=VALUE)")
    read_manifest(folder)  # a missing or broken index fails here, before any lock file
    with writer_lock(folder, wait=wait, on_wait=on_note):
        return _delete(folder, list(dict.fromkeys(doc_ids)), where)


def _delete(folder: Path, doc_ids: list[str], where: Condition | None) -> DeleteResult:
    t0 = time.perf_counter()
    manifest = Manifest.read(folder)
    require_whole(folder, manifest.files, manifest.count)  # before anything is read from its files
    total = whole_count(folder)
    with MetadataStore.open(folder / META_FILE) as store:
        drop = matching_rows(store, doc_ids, where)
        note = _unmatched(store, doc_ids, where, drop)
    if not len(drop):
        return DeleteResult(folder, 0, total, time.perf_counter() - t0, note)
    asked = " and ".join(([f"doc_id in {len(doc_ids):,} ids"] if doc_ids else []) +
                         ([where.text] if where else []))
    if len(drop) == total:
        raise UsageError(f"{folder}: {asked} matches all {total:,} rows; an index cannot be "
                         "empty: build a new index instead (or remove the folder)")
    with working_copy(folder) as work:
        n = compact(folder, work, keep_mask(total, drop))
        done = {"count": len(drop), "where": asked,
                "seconds": round(time.perf_counter() - t0, 3), "at": now()}
        write_manifest(work, compose_manifest(
            manifest.to_dict(), count=n, corpus=held_files(work, manifest.corpus),
            deleted=[*manifest.deleted, done]))
    swap_in(work, folder)
    return DeleteResult(folder, len(drop), n, time.perf_counter() - t0, note)


def whole_count(folder: Path) -> int:
    """The rows of an index whose vectors and rows agree (UnusableIndex where they do not: the
    rows to keep could not be matched with their vectors)."""
    got = counts(folder)
    if got["vectors"] != got["rows"]:
        raise UnusableIndex(f"{folder}: index holds {got['vectors']:,} vectors but the metadata "
                          f"{got['rows']:,} rows; rebuild the index")
    return int(got["rows"] or 0)


def matching_rows(store: MetadataStore, doc_ids: Sequence[str],
                  where: Condition | None = None) -> np.ndarray:
    """Sorted ids of the rows whose doc_id is one of `doc_ids` (none given: any row) and that
    match `where`."""
    if not doc_ids:
        return store.ids_where(where.clause, where.params) if where else np.empty(0, np.int64)
    parts = [store.ids_where(clause, params) for clause, params in _by_ids(store, doc_ids, where)]
    return np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def _by_ids(store: MetadataStore, doc_ids: Sequence[str],
            where: Condition | None) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """The condition "doc_id is one of `doc_ids` (and `where`)", a few thousand ids at a time;
    nothing for an index from before the record columns (no row has an id)."""
    if "doc_id" not in store.columns():
        return
    extra = f" AND ({where.clause})" if where else ""
    for i in range(0, len(doc_ids), IDS_PER_QUERY):
        chunk = tuple(doc_ids[i:i + IDS_PER_QUERY])
        yield (f"sentences.doc_id IN ({', '.join('?' * len(chunk))}){extra}",
               (*chunk, *(where.params if where else ())))


def _unmatched(store: MetadataStore, doc_ids: list[str], where: Condition | None,
               drop: np.ndarray) -> str:
    """The note for what matched nothing: the record ids no row has, or the whole request."""
    found = {v for clause, params in _by_ids(store, doc_ids, where)
             for v in store.distinct("doc_id", clause, params)}
    missing = [d for d in doc_ids if d not in found]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5:,} more"
                                           if len(missing) > 5 else "")
        return (f"delete: no rows with doc_id {shown}" + (f" where {where.text}" if where else "")
                + (f" ({len(missing):,} of {len(doc_ids):,} ids)" if len(doc_ids) > 1 else ""))
    if not len(drop):
        return f"delete: 0 rows matched {where.text if where else ''}".rstrip() + \
            "; the index is unchanged"
    return ""


def keep_mask(total: int, drop: np.ndarray) -> np.ndarray:
    keep = np.ones(total, dtype=bool)
    keep[drop] = False
    return keep


def compact(source: Path, work: Path, keep: np.ndarray) -> int:
    """Write into the working copy `work` the index `source` holding only the rows `keep`
    (a mask over its row ids), renumbered 0..n-1 in order; every file but the manifest.
    Returns the rows kept."""
    n = keep_rows(source / INDEX_FILE, work / INDEX_FILE, keep)
    db = work / META_FILE
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    new_id = np.cumsum(keep) - 1
    with MetadataStore.open(source / META_FILE) as old, MetadataStore.create(db) as store:
        for rows in old.iter_rows():
            store.insert_many((int(new_id[r[0]]), *r[1:]) for r in rows if keep[r[0]])
        if store.count() != n:
            raise UnusableIndex(f"{source}: {store.count():,} rows kept against {n:,} vectors; "
                              "rebuild the index")
        if old.has_fts():  # an index built with one keeps it whole
            store.fts_create()
            store.fts_fill(0)
        store.checkpoint()
        if bm25.exists(source):  # the copy's files, filtered (exact, no text read again)
            bm25.keep_rows(work, keep)
        else:  # an index built before them gets them here
            bm25.write_for(work, db)
        if (work / PARQUET_FILE).exists():
            store.to_parquet(work / PARQUET_FILE)
    return n


def held_files(folder: Path, corpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's input files that still have rows in `folder`: a file all of whose rows
    were deleted is forgotten, so that adding it again is not skipped as a duplicate."""
    with MetadataStore.open(folder / META_FILE) as store:
        sources = set(store.distinct("source"))
    return [c for c in corpus if c.get("path") in sources]
