"""The spooled shards of a build in `<out>.partial/shards/`: Parquet rows (text and origin) and
`.npy` vectors, each written to a temporary name and renamed, so a shard file that exists is
whole and a rerun can trust it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from qtsearch.core.disk import writing
from qtsearch.text.sentence import ARTICLE_FIELDS, SentenceRow

#: The rows of a shard, in the metadata store's column order (qtsearch.index.schema.COLUMNS).
ROW_SCHEMA = pa.schema([
    ("id", pa.int64()), ("text", pa.string()), ("source", pa.string()),
    ("line", pa.int64()), ("doc", pa.int64()), ("position", pa.int64()),
    *((name, pa.string()) for name in ARTICLE_FIELDS),
])


def rows_path(shards: Path, i: int) -> Path:
    return shards / f"rows_{i:05d}.parquet"


def emb_path(shards: Path, i: int) -> Path:
    return shards / f"emb_{i:05d}.npy"


def write_rows(path: Path, rows: list[SentenceRow], first_id: int) -> None:
    text, source, line, doc, position, *article = zip(*rows, strict=True)
    table = pa.table({
        "id": pa.array(range(first_id, first_id + len(rows)), type=pa.int64()),
        "text": text, "source": source,
        "line": pa.array(line, type=pa.int64()),
        "doc": pa.array(doc, type=pa.int64()),
        "position": pa.array(position, type=pa.int64()),
        **dict(zip(ARTICLE_FIELDS, article, strict=True)),
    }, schema=ROW_SCHEMA)
    tmp = path.with_name(path.name + ".tmp")
    with writing(path, tmp):
        pq.write_table(table, tmp)
    os.replace(tmp, path)


@contextmanager
def rows_behind(shards: Path) -> Iterator[Callable[[int, list[SentenceRow], int], None]]:
    """`write(shard, rows, first_id)`: `write_rows` of the shard, done by a thread behind the
    caller (Parquet's encoding and writing release the GIL, so reading the next shard goes on
    meanwhile), one shard at a time: a write waits for the one before, whose failure (a full
    disk) it raises; leaving the block waits for the last one and raises its failure."""
    with ThreadPoolExecutor(1) as pool:
        pending: Future[None] | None = None

        def write(shard: int, rows: list[SentenceRow], first_id: int) -> None:
            nonlocal pending
            if pending is not None:
                pending.result()
            pending = pool.submit(write_rows, rows_path(shards, shard), rows, first_id)

        yield write
        if pending is not None:
            pending.result()


def read_rows(path: Path) -> Iterator[tuple[Any, ...]]:
    """The rows of a shard as tuples in ROW_SCHEMA's column order (the store's row layout)."""
    table = pq.read_table(path)
    cols = [table.column(name).to_pylist() for name in ROW_SCHEMA.names]
    return zip(*cols, strict=True)


def read_texts(path: Path) -> list[str]:
    return pq.read_table(path, columns=["text"]).column("text").to_pylist()


def shard_rows(path: Path) -> int:
    """Rows in a shard, from the Parquet footer (no data read)."""
    return pq.ParquetFile(path).metadata.num_rows


def write_npy(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp.npy")
    with writing(path, tmp):  # numpy's short write names neither the file nor the cause
        np.save(tmp, array)
    os.replace(tmp, path)


def one_ahead(fn: Callable[[int], Any], items: list[int], enabled: bool) -> Iterator[Any]:
    """fn(item) for each item in order; when `enabled`, fn(next item) runs in a thread while
    the caller works on the current result."""
    if not enabled:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(1) as pool:
        pending = None
        for item in items:
            submitted = pool.submit(fn, item)
            if pending is not None:
                yield pending.result()
            pending = submitted
        if pending is not None:
            yield pending.result()


def sample_rows(vectors: Iterable[np.ndarray], count: int, size: int, seed: int) -> np.ndarray:
    """`size` of the `count` rows that `vectors` yields in pieces, chosen at random with a
    fixed seed (reruns fit and train on the same sample), as one float32 matrix."""
    ids = np.sort(np.random.default_rng(seed).choice(count, size=min(size, count),
                                                     replace=False))
    parts, offset = [], 0
    for piece in vectors:
        lo, hi = np.searchsorted(ids, [offset, offset + piece.shape[0]])
        parts.append(np.asarray(piece[ids[lo:hi] - offset]))
        offset += piece.shape[0]
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
