"""The metadata stage of a build: every row read into the SQLite store, then the lexical leg's
exact BM25 files from it (qtsearch.index.bm25; no FTS5 table beside them), and the Parquet
export where asked for. It can run beside the embed and index stages
(qtsearch.indexing.state.stage_beside): it checks `stop` between its steps."""

from __future__ import annotations

import threading
from pathlib import Path

from qtsearch.core.errors import Stopped, UnusableIndex
from qtsearch.core.progress import Reporter
from qtsearch.index import bm25
from qtsearch.index.names import META_FILE, PARQUET_FILE
from qtsearch.index.store import MetadataStore
from qtsearch.indexing import shards as shard_files


def write_metadata(partial: Path, shards: Path, count: int, shard_count: int,
                   reporter: Reporter, parquet: bool, stop: threading.Event) -> None:
    """Write the store, the BM25 files (and the Parquet file) of a partial index from its
    `shard_count` row shards in `shards` (`count` rows in all), a stale store replaced."""
    db = partial / META_FILE
    for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        stale.unlink(missing_ok=True)
    with reporter.stage("metadata", count, "rows") as advance, MetadataStore.create(db) as store:
        for i in range(shard_count):
            Stopped.check(stop)
            advance(store.insert_many(shard_files.read_rows(shard_files.rows_path(shards, i))))
        if store.count() != count:
            raise UnusableIndex(f"{db}: holds {store.count():,} rows, expected {count:,}")
        store.checkpoint()
        bm25.write_for(partial, db, stop=stop)
        if parquet:
            Stopped.check(stop)
            store.to_parquet(partial / PARQUET_FILE)
