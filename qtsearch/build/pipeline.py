"""Corpus → searchable index: read → embed → spool shards → faiss → SQLite metadata.

Memory stays flat as the corpus grows: sentences are read into fixed-size shards (Parquet, with
their source, line, document and position), each shard is embedded into an `.npy` file, and the
index is trained on a sample and filled shard by shard. Only the final index itself grows.

Builds are atomic and resumable. Everything is written into `<out>.partial/` with a small
`state.json`; a rerun with the same corpus, model and options skips what is finished (reading,
every embedded shard, the trained index), and the finished folder is renamed into place in one
step, so no reader ever sees half an index. `--overwrite` keeps the old index until the new one
is complete. `add_to_index` appends to an existing index on a copy and swaps it in the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from qtsearch import __version__
from qtsearch.config import save_config, write_json_atomic
from qtsearch.encode.encoder import Encoder, load_encoder
from qtsearch.errors import (
    IndexError_,
    InputError,
    Interrupted,
    ModelError,
    OutputError,
    UsageError,
)
from qtsearch.index.choose import TARGET_RECALL, IndexChoice, choose_index
from qtsearch.index.faiss_backend import (
    FaissBuilder,
    apply_search_params,
    exact_neighbours,
    measure_recall,
    open_faiss_index,
    resolve_faiss_device,
    tune_search,
    write_faiss_index,
)
from qtsearch.index.manifest import (
    CONFIG_FILE,
    FORMAT,
    INDEX_FILE,
    INDEX_TYPES,
    MANIFEST,
    META_FILE,
    PARQUET_FILE,
    VERSION,
    read_manifest,
    write_manifest,
)
from qtsearch.index.store import MetadataStore
from qtsearch.text.reader import Sentence, list_files, read_sentences

log = logging.getLogger("qtsearch")

STAGES = ("read", "embed", "index", "metadata")
STATE_FILE = "state.json"
SHARDS = "shards"
#: Queries sampled from the corpus to tune nprobe / efSearch, and k of the recall target.
TUNE_QUERIES = 500
TUNE_K = 10
_SEED = 0
#: The metadata stage runs beside the index stage only with this many CPUs: on fewer, a Python
#: thread next to faiss's OpenMP threads oversubscribes the cores and slows both.
PARALLEL_MIN_CPUS = 4

_ROW_SCHEMA = pa.schema([
    ("id", pa.int64()), ("text", pa.string()), ("source", pa.string()),
    ("line", pa.int64()), ("doc", pa.int64()), ("position", pa.int64()),
])


@dataclass
class IndexConfig:
    """Options of `qtsearch build-index`, saved as config.json in the index folder."""

    corpus: list[str]
    model: str | None = None  # None: the shipped default model
    out: str | None = None  # None: indexes/<corpus name>/
    index: str = "auto"  # auto | flat | sq8 | ivf-pq | hnsw
    split_sentences: bool = False
    device: str = "auto"  # auto | cpu | cuda (embedding and faiss)
    precision: str = "auto"  # auto | fp32 | bf16 (embedding)
    parquet: bool = False  # also write meta.parquet
    shard_size: int = 50_000  # sentences per spooled shard (the unit of resumption)
    batch_size: int = 512  # sentences per embedding batch
    overwrite: bool = False


@dataclass
class BuildResult:
    """What a build produced, for the summary table and for callers."""

    path: Path
    manifest: dict[str, Any]
    resumed: list[str] = field(default_factory=list)  # what a rerun could skip
    bytes_on_disk: int = 0


def total_seconds(stages: dict[str, float], parallel: bool | None = None) -> float:
    """Build time from the stage times; the index and metadata stages overlap on machines
    with PARALLEL_MIN_CPUS or more (`parallel`: whether they did; default: this machine)."""
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= PARALLEL_MIN_CPUS
    index, meta = stages.get("index", 0.0), stages.get("metadata", 0.0)
    return (stages.get("read", 0.0) + stages.get("embed", 0.0)
            + (max(index, meta) if parallel else index + meta))


def default_out(corpus: list[str]) -> Path:
    """indexes/<name of the first corpus path without .gz/.txt>."""
    name = Path(corpus[0]).name
    for suffix in (".gz", ".txt", ".text"):
        name = name.removesuffix(suffix)
    return Path("indexes") / (name or "corpus")


def file_checksum(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": h.hexdigest()}


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------------------
# Progress: rich bars with ETA per stage, or nothing.


class Progress:
    """One rich progress bar per stage (on stderr); silent when disabled."""

    def __init__(self, enabled: bool, console: Any = None):
        self._bar = None
        if enabled:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description:<9}"), BarColumn(), _count_column(),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=console, transient=False)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._bar is not None:
            if exc_type is not None:  # leave the error as the last, single line
                for task in list(self._bar.task_ids):
                    self._bar.remove_task(task)
            self._bar.stop()

    @contextlib.contextmanager
    def stage(self, name: str, total: float | None, unit: str = "") -> Iterator[Bar]:
        if self._bar is None:
            yield Bar(None, None)
            return
        bar = Bar(self._bar, self._bar.add_task(name, total=total, unit=unit))
        yield bar
        bar.finish()

    def note(self, text: str, warn: bool = False) -> None:
        """A message above the bars; without bars (quiet), warnings still reach the log."""
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            log.log(logging.WARNING if warn else logging.INFO, text)


class Bar:
    """A stage's bar: call it with a count to advance; `grow` raises the total."""

    def __init__(self, progress: Any, task: Any):
        self.progress, self.task = progress, task

    def __call__(self, n: float) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def _task(self) -> Any:
        return next(t for t in self.progress.tasks if t.id == self.task)

    def grow(self, n: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=(self._task().total or 0) + n)

    def finish(self) -> None:
        """Show the stage as complete (totals of a stage are estimates)."""
        if self.progress is not None:
            task = self._task()
            self.progress.update(self.task, total=task.completed, completed=task.completed)


def _count_column() -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """done/total and the stage's unit (MB with one decimal)."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "")
            fmt = ",.1f" if unit == "MB" else ",.0f"
            done = format(task.completed, fmt)
            text = f"{done}/{format(task.total, fmt)}" if task.total is not None else done
            return Text(f"{text} {unit}")

    return CountColumn()


# ---------------------------------------------------------------------------------------------
# Shards: Parquet rows + .npy vectors, written atomically.


def _rows_path(shards: Path, i: int) -> Path:
    return shards / f"rows_{i:05d}.parquet"


def _emb_path(shards: Path, i: int) -> Path:
    return shards / f"emb_{i:05d}.npy"


def _write_rows(path: Path, rows: list[Sentence], first_id: int) -> None:
    table = pa.table({
        "id": pa.array(range(first_id, first_id + len(rows)), type=pa.int64()),
        "text": [r.text for r in rows], "source": [r.source for r in rows],
        "line": pa.array([r.line for r in rows], type=pa.int64()),
        "doc": pa.array([r.doc for r in rows], type=pa.int64()),
        "position": pa.array([r.position for r in rows], type=pa.int64()),
    }, schema=_ROW_SCHEMA)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def _one_ahead(fn: Callable[[int], Any], items: list[int], enabled: bool) -> Iterator[Any]:
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


def _write_npy(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# Build.


class Builder:
    """One build of one index folder; `run()` does (or resumes) every stage."""

    def __init__(self, config: IndexConfig, progress: bool = True, console: Any = None):
        if config.shard_size < 1 or config.batch_size < 1:
            raise UsageError("--shard-size and --batch-size must be at least 1")
        if config.index != "auto" and config.index not in INDEX_TYPES:
            raise UsageError(f"--index must be auto or one of {', '.join(INDEX_TYPES)}, "
                             f"not {config.index!r}")
        self.config = config
        self.out = Path(config.out) if config.out else default_out(config.corpus)
        self.partial = self.out.with_name(self.out.name + ".partial")
        self.shards = self.partial / SHARDS
        self.progress = Progress(progress, console)
        self.state: dict[str, Any] = {}
        self._lock = threading.Lock()  # the index and metadata stages may run side by side

    # -- checks before any work ------------------------------------------------------------
    def _check_output(self) -> None:
        if not self.out.exists():
            return
        if not self.config.overwrite:
            raise OutputError(f"{self.out}: already exists (use --overwrite to replace it, or "
                              f"--out for another folder)")
        if not self.out.is_dir() or not (
                (self.out / MANIFEST).is_file() or not any(self.out.iterdir())):
            raise OutputError(f"{self.out}: exists and is not a qtsearch index; refusing to "
                              f"replace it")

    def _resume_key(self, corpus: list[dict[str, Any]], encoder: Encoder) -> str:
        """What the spooled shards depend on: same key → the shards can be reused."""
        c = self.config
        basis = {"corpus": [(x["path"], x["sha256"]) for x in corpus],
                 "model": encoder.fingerprint, "split": c.split_sentences,
                 "shard_size": c.shard_size, "batch_size": c.batch_size,
                 "precision": c.precision, "device": str(encoder.device.type)}
        return hashlib.sha256(repr(sorted(basis.items())).encode()).hexdigest()[:16]

    def _load_state(self, key: str) -> list[str]:
        """Reuse `<out>.partial` when it belongs to the same build; start afresh otherwise."""
        path = self.partial / STATE_FILE
        if path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                state = {}
            if state.get("finished") and (
                    state["index"]["requested"] != self.config.index
                    or (self.partial / PARQUET_FILE).exists() != self.config.parquet):
                state = {}  # finished with other options and its shards are gone: redo
            if state.get("key") == key:
                self.state = state
                done = ["everything"] if state.get("finished") else []
                if state.get("read"):
                    done.append("read")
                if state.get("embedded"):
                    done.append(f"{len(state['embedded'])} embedded shards")
                if state.get("index"):
                    done.append("index")
                return done
            log.warning("%s: left by a build with other inputs or options; starting afresh",
                        self.partial)
        if self.partial.exists():
            shutil.rmtree(self.partial)
        self.shards.mkdir(parents=True)
        self.state = {"key": key, "read": None, "embedded": [], "index": None,
                      "stages": dict.fromkeys(STAGES, 0.0)}
        self._save_state()
        return []

    def _save_state(self) -> None:
        with self._lock:
            write_json_atomic(self.partial / STATE_FILE, self.state)

    def _timed(self, stage: str, start: float) -> None:
        with self._lock:
            self.state["stages"][stage] = round(self.state["stages"][stage]
                                                + time.perf_counter() - start, 3)
        self._save_state()

    # -- stages ----------------------------------------------------------------------------
    def _read(self, files: list[Path]) -> None:
        """Stream sentences into Parquet row shards of `shard_size` (resumes from scratch:
        reading is cheap next to embedding)."""
        c = self.config
        t0 = time.perf_counter()
        sizes = {str(f): f.stat().st_size for f in files}
        n, shard, buf = 0, 0, []
        current = None
        with self.progress.stage("read", sum(sizes.values()) / 1e6, "MB") as advance:
            for s in read_sentences([str(f) for f in files], split=c.split_sentences):
                if s.source != current:
                    if current is not None:
                        advance(sizes.get(current, 0) / 1e6)
                    current = s.source
                buf.append(s)
                if len(buf) == c.shard_size:
                    _write_rows(_rows_path(self.shards, shard), buf, n)
                    n += len(buf)
                    shard += 1
                    buf = []
            if buf:
                _write_rows(_rows_path(self.shards, shard), buf, n)
                n += len(buf)
                shard += 1
            advance(sizes.get(current or "", 0) / 1e6)
        self.state["read"] = {"count": n, "shards": shard}
        self._timed("read", t0)

    def _embed(self, encoder: Encoder) -> None:
        """Embed every shard not embedded yet, in length-sorted batches (Encoder.encode).

        Where `Encoder.tokenises_alongside`, a thread tokenises the next shard meanwhile: in
        the main thread tokenising took 29 of the 43 s embedding stage of a 1M-sentence build
        on an H100, the GPU idle meanwhile, and ~6% of the stage on 2 CPU cores."""
        c = self.config
        t0 = time.perf_counter()
        count, shards = self.state["read"]["count"], self.state["read"]["shards"]
        done = set(self.state["embedded"])
        already = sum(pq.ParquetFile(_rows_path(self.shards, i)).metadata.num_rows
                      for i in done)
        def token_ids(shard: int) -> list[list[int]]:
            texts = pq.read_table(_rows_path(self.shards, shard), columns=["text"])
            return [encoder.token_ids(t) for t in texts.column("text").to_pylist()]

        todo = [i for i in range(shards) if i not in done]
        with self.progress.stage("embed", count, "sentences") as advance:
            advance(already)
            ahead = encoder.tokenises_alongside
            for i, ids in zip(todo, _one_ahead(token_ids, todo, ahead), strict=True):
                vectors = encoder.encode_ids(ids, c.batch_size, normalize=True,
                                             progress=advance)
                _write_npy(_emb_path(self.shards, i), vectors)
                self.state["embedded"].append(i)
                self._timed("embed", t0)
                t0 = time.perf_counter()
        self._timed("embed", t0)

    def _vectors(self) -> Iterator[np.ndarray]:
        for i in range(self.state["read"]["shards"]):
            yield np.load(_emb_path(self.shards, i), mmap_mode="r")

    def _sample(self, size: int, seed: int) -> np.ndarray:
        """`size` corpus vectors chosen at random (fixed seed: reruns train the same index)."""
        n = self.state["read"]["count"]
        ids = np.sort(np.random.default_rng(seed).choice(n, size=min(size, n), replace=False))
        parts, offset = [], 0
        for shard in self._vectors():
            lo, hi = np.searchsorted(ids, [offset, offset + shard.shape[0]])
            parts.append(np.asarray(shard[ids[lo:hi] - offset]))
            offset += shard.shape[0]
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)

    def _fill(self, key: str, dim: int, device: str, train_size: int,
              bar: Callable[[float], None]) -> FaissBuilder:
        """A trained index of every shard (train on a fixed-seed sample, add shard by shard)."""
        builder = FaissBuilder(key, dim, device)
        if builder.needs_training:
            builder.train(self._sample(max(train_size, 1), _SEED))
        builder.reserve(self.state["read"]["count"])
        bar(1)
        for vectors in self._vectors():
            builder.add(np.asarray(vectors))
            bar(1)
        return builder

    def _index(self, dim: int) -> IndexChoice:
        """Choose, build, then measure (and tune) recall@10 against exact search on corpus
        queries; an 8-bit scalar quantizer that misses the target is rebuilt with fp16."""
        t0 = time.perf_counter()
        n, shards = self.state["read"]["count"], self.state["read"]["shards"]
        choice = choose_index(n, dim, self.config.index)
        self.progress.note(f"index: {choice.index_type} ({choice.key}): {choice.why}")
        device = resolve_faiss_device(self.config.device)
        params: dict[str, Any] = {}
        quality: dict[str, Any] = {}
        key, why = choice.key, choice.why
        with self.progress.stage("index", shards + 2, "steps") as bar:
            builder = self._fill(key, dim, device, choice.train_size, bar)
            if choice.index_type != "flat":
                queries = self._sample(TUNE_QUERIES, _SEED + 1)
                truth = exact_neighbours(queries, self._vectors(), min(TUNE_K, n))
                if choice.tune:
                    params, recall = tune_search(
                        builder.index, choice.tune, choice.candidates, queries, truth,
                        TARGET_RECALL, choice.outer, choice.outer_candidates)
                else:
                    recall = measure_recall(builder.index, params, queries, truth)
                if recall < TARGET_RECALL and choice.fallback_key:
                    why += (f"; {key} reached recall@{truth.shape[1]} {recall:.3f} < "
                            f"{TARGET_RECALL} on these vectors, so rebuilt as "
                            f"{choice.fallback_key}")
                    self.progress.note(f"index: {key} recall@{truth.shape[1]} {recall:.3f} < "
                                       f"{TARGET_RECALL}: rebuilding as {choice.fallback_key}")
                    key = choice.fallback_key
                    bar.grow(shards + 1)
                    builder = self._fill(key, dim, device, choice.train_size, bar)
                    recall = measure_recall(builder.index, params, queries, truth)
                if recall < TARGET_RECALL:
                    self.progress.note(
                        f"index: warning: {key} reaches recall@{truth.shape[1]} {recall:.3f} at "
                        f"best (target {TARGET_RECALL}); these vectors are hard to tell apart, "
                        f"--index flat is exact", warn=True)
                quality = {f"recall@{truth.shape[1]}": round(recall, 4),
                           "queries": int(queries.shape[0]), "target": TARGET_RECALL}
            bar(1)
        apply_search_params(builder.index, params)
        write_faiss_index(builder.index, self.partial / INDEX_FILE)
        with self._lock:
            self.state["index"] = {"requested": self.config.index, "type": choice.index_type,
                                   "key": key, "params": params, "why": why,
                                   "recall": quality, "device": device}
        self._timed("index", t0)
        return choice

    def _metadata(self) -> None:
        t0 = time.perf_counter()
        db = self.partial / META_FILE
        for stale in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            stale.unlink(missing_ok=True)
        count = self.state["read"]["count"]
        with self.progress.stage("metadata", count, "rows") as advance, \
                MetadataStore.create(db) as store:
            for i in range(self.state["read"]["shards"]):
                table = pq.read_table(_rows_path(self.shards, i))
                cols = [table.column(name).to_pylist() for name in _ROW_SCHEMA.names]
                advance(store.insert_many(zip(*cols, strict=True)))
            store.checkpoint()
            if store.count() != count:
                raise IndexError_(f"{db}: holds {store.count():,} rows, expected {count:,}")
            if self.config.parquet:
                store.to_parquet(self.partial / PARQUET_FILE)
        self._timed("metadata", t0)

    def _stages(self, files: list[Path], encoder: Encoder) -> None:
        c = self.config
        with self.progress:
            if not self.state["read"]:
                try:
                    self._read(files)
                except InputError:  # nothing worth resuming yet: leave no trace
                    shutil.rmtree(self.partial, ignore_errors=True)
                    raise
            self._embed(encoder)
            redo_index = (self.state["index"] or {}).get("requested") != c.index
            if (os.cpu_count() or 1) < PARALLEL_MIN_CPUS:
                if redo_index:
                    self._index(encoder.dim)
                self._metadata()
                return
            # SQLite inserts (Python, GIL-bound) overlap faiss training/adding (native code
            # that releases the GIL): on a many-core machine the metadata stage is then free.
            with ThreadPoolExecutor(max_workers=1) as pool:
                metadata = pool.submit(self._metadata)
                try:
                    if redo_index:
                        self._index(encoder.dim)
                finally:
                    metadata.result()

    def _manifest(self, encoder: Encoder, corpus: list[dict[str, Any]]) -> dict[str, Any]:
        c, info = self.config, self.state["index"]
        return {
            "format": FORMAT, "version": VERSION, "count": self.state["read"]["count"],
            "dim": encoder.dim, "index_type": info["type"], "index_key": info["key"],
            "index_params": info["params"], "metric": "cosine",
            "model": {"path": str(encoder.path.resolve()), "name": encoder.name,
                      "fingerprint": encoder.fingerprint, "dim": encoder.dim},
            "corpus": corpus, "split_sentences": c.split_sentences,
            "stages": dict(self.state["stages"]),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "qtsearch_version": __version__,
            "build": {"why": info["why"], "recall": info["recall"], "faiss_device": info["device"],
                      "embed_device": str(encoder.device), "shard_size": c.shard_size,
                      "parallel_stages": (os.cpu_count() or 1) >= PARALLEL_MIN_CPUS},
        }

    def _interrupted(self) -> str:
        """What a rerun of the interrupted build will not redo, and how to rerun it."""
        read = self.state.get("read")
        if not read:
            return "interrupted while reading the corpus; run the same command again to start over"
        return (f"interrupted; the {read['count']:,} sentences read and "
                f"{len(self.state['embedded'])} of {read['shards']} embedded shards are kept in "
                f"{self.partial}: run the same command again to continue from there")

    # -- the whole build -------------------------------------------------------------------
    def run(self) -> BuildResult:
        c = self.config
        self._check_output()
        files = list_files(c.corpus)
        encoder = load_encoder(c.model, device=c.device, precision=c.precision)
        corpus = [file_checksum(f) for f in files]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        resumed = self._load_state(self._resume_key(corpus, encoder))
        if resumed:
            self.progress.note(f"resuming {self.partial}: {', '.join(resumed)} already done")
        if self.state.get("finished"):  # killed between finishing and renaming
            manifest = read_manifest(self.partial)
        else:
            try:
                self._stages(files, encoder)
            except KeyboardInterrupt:
                raise Interrupted(self._interrupted()) from None
            manifest = self._manifest(encoder, corpus)
            save_config(c, self.partial / CONFIG_FILE)
            write_manifest(self.partial, manifest)
            with self._lock:
                self.state["finished"] = True
            self._save_state()
        shutil.rmtree(self.shards, ignore_errors=True)  # also when a kill interrupted this
        swap_in(self.partial, self.out)
        (self.out / STATE_FILE).unlink()  # after the rename, so a kill before it can resume
        return BuildResult(self.out, manifest, resumed, folder_bytes(self.out))


def swap_in(new: Path, out: Path) -> None:
    """Put the finished folder `new` at `out` with renames only: a reader sees the old index
    or the new one, never a mix; the old one is deleted only after the new one is in place."""
    if not out.exists():
        os.replace(new, out)
        return
    old = out.with_name(f"{out.name}.old-{os.getpid()}")
    os.replace(out, old)
    try:
        os.replace(new, out)
    except OSError:
        os.replace(old, out)
        raise
    shutil.rmtree(old)


def build_index(config: IndexConfig, progress: bool = True, console: Any = None) -> BuildResult:
    """Build (or resume building) the index described by `config`."""
    return Builder(config, progress, console).run()


# ---------------------------------------------------------------------------------------------
# Derive: another index type from the vectors of an exact index, without embedding again.


class _FromIndex(Builder):
    """A build whose vectors come from an existing flat index instead of embedded shards:
    the index stage (choice, training sample, shard-by-shard add, recall tuning) is the
    builder's own, so a derived index is the one `build-index --index TYPE` would make."""

    def __init__(self, source: Path, config: IndexConfig, progress: bool, console: Any):
        super().__init__(config, progress, console)
        self.source = source
        self.source_manifest = read_manifest(source)
        if self.source_manifest["index_type"] != "flat":
            raise UsageError(f"{source}: is a {self.source_manifest['index_type']} index; "
                             f"only a flat index holds the exact vectors to build from")
        self.vectors = open_faiss_index(source / INDEX_FILE, mmap=True)  # only read from

    def _vectors(self) -> Iterator[np.ndarray]:
        n, step = int(self.vectors.ntotal), self.config.shard_size
        for lo in range(0, n, step):
            yield self.vectors.reconstruct_n(lo, min(step, n - lo))

    def run(self) -> BuildResult:
        self._check_output()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.partial.exists():
            shutil.rmtree(self.partial)
        self.partial.mkdir()
        n, step = int(self.vectors.ntotal), self.config.shard_size
        self.state = {"read": {"count": n, "shards": -(-n // step)}, "index": None,
                      "stages": dict.fromkeys(STAGES, 0.0)}
        with self.progress:
            self._index(int(self.source_manifest["dim"]))
        t0 = time.perf_counter()
        for name in (META_FILE, PARQUET_FILE):
            if (self.source / name).is_file():
                shutil.copyfile(self.source / name, self.partial / name)
        self._timed("metadata", t0)
        info, src = self.state["index"], self.source_manifest
        manifest = {
            **src, "index_type": info["type"], "index_key": info["key"],
            "index_params": info["params"], "stages": dict(self.state["stages"]),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "qtsearch_version": __version__,
            "build": {**src.get("build", {}), "why": info["why"], "recall": info["recall"],
                      "faiss_device": info["device"], "shard_size": self.config.shard_size,
                      "derived_from": {"path": str(self.source.resolve()),
                                       "stages": src.get("stages", {})}},
        }
        save_config(self.config, self.partial / CONFIG_FILE)
        write_manifest(self.partial, manifest)
        (self.partial / STATE_FILE).unlink()
        swap_in(self.partial, self.out)
        return BuildResult(self.out, manifest, [], folder_bytes(self.out))


def build_from_index(source: str | os.PathLike, out: str | os.PathLike, index_type: str,
                     device: str = "auto", overwrite: bool = False, progress: bool = True,
                     console: Any = None) -> BuildResult:
    """Build an `index_type` index folder at `out` from the vectors and metadata of the flat
    index `source`, without reading or embedding the corpus again (embedding is by far the
    costliest stage: ~3 min per million sentences on 2 cores). Its manifest records the
    source under build.derived_from; its stages hold only the work done here."""
    folder = Path(source)
    manifest = read_manifest(folder)
    config = IndexConfig(corpus=[c["path"] for c in manifest.get("corpus", [])],
                         model=manifest["model"].get("path"), out=str(out), index=index_type,
                         split_sentences=bool(manifest.get("split_sentences", False)),
                         device=device, parquet=(folder / PARQUET_FILE).is_file(),
                         shard_size=int(manifest.get("build", {}).get("shard_size", 50_000)),
                         overwrite=overwrite)
    if Path(out).resolve() == folder.resolve():
        raise UsageError(f"{out}: the derived index must go to another folder than its source")
    return _FromIndex(folder, config, progress, console).run()


# ---------------------------------------------------------------------------------------------
# Append.


@dataclass
class AddResult:
    path: Path
    added: int
    count: int
    seconds: float


def add_to_index(index_dir: str | os.PathLike, corpus: list[str], split_sentences: bool = False,
                 device: str = "auto", batch_size: int = 512, chunk: int = 50_000,
                 progress: bool = True, console: Any = None) -> AddResult:
    """Append the sentences of `corpus` to an existing index with the index's own model.

    New ids continue after the last one and documents after the last document. The work is
    done on a copy (`<index>.adding/`) that replaces the index only when complete.
    """
    t0 = time.perf_counter()
    folder = Path(index_dir)
    manifest = read_manifest(folder)
    files = list_files(corpus)
    model_path = Path(manifest["model"]["path"])
    encoder = load_encoder(model_path, device=device)
    if encoder.fingerprint != manifest["model"]["fingerprint"]:
        raise ModelError(f"{model_path}: the model changed since this index was built "
                         f"(fingerprint {encoder.fingerprint} != "
                         f"{manifest['model']['fingerprint']}); rebuild the index")
    work = folder.with_name(folder.name + ".adding")
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(folder, work)
    try:
        index = open_faiss_index(work / INDEX_FILE)
        start = int(index.ntotal)
        with MetadataStore.open(work / META_FILE, readonly=False) as store:
            if store.count() != start:
                raise IndexError_(f"{folder}: index holds {start:,} vectors but the metadata "
                                  f"{store.count():,} rows; rebuild the index")
            first_doc = store.max_doc() + 1
            n = start
            sentences = read_sentences([str(f) for f in files], split=split_sentences)
            with Progress(progress, console) as bars, bars.stage("add", None, "sentences") as adv:
                for batch in _chunks(sentences, chunk):
                    vectors = encoder.encode([b.text for b in batch], batch_size,
                                             normalize=True, progress=adv)
                    index.add(vectors)
                    store.insert_many((n + k, b.text, b.source, b.line, b.doc + first_doc,
                                       b.position) for k, b in enumerate(batch))
                    n += len(batch)
            store.checkpoint()
            if (work / PARQUET_FILE).exists():
                store.to_parquet(work / PARQUET_FILE)
        write_faiss_index(index, work / INDEX_FILE)
        manifest["count"] = n
        manifest["corpus"] = manifest["corpus"] + [file_checksum(f) for f in files]
        manifest.setdefault("added", []).append({
            "count": n - start, "seconds": round(time.perf_counter() - t0, 3),
            "at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
        write_manifest(work, manifest)
    except BaseException as e:
        shutil.rmtree(work, ignore_errors=True)
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted(f"interrupted; {folder} is unchanged") from None
        raise
    swap_in(work, folder)
    return AddResult(folder, n - start, n, time.perf_counter() - t0)


def _chunks(items: Iterable[Sentence], size: int) -> Iterator[list[Sentence]]:
    """Consecutive lists of `size` items (the last one shorter): bounded memory."""
    batch: list[Sentence] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
