"""`build-index --engine ray`: the same build with its heavy stages spread over a Ray cluster
(Ray Data), for corpora that outgrow one machine. Needs the `[ray]` extra; nothing else in
qtsearch imports Ray.

The work is partitioned by output shard, as clip-retrieval does it. The driver reads the corpus into
the build's row shards (`shards/rows_i.parquet`: text and origin, global ids; one thread, which the
cost model in docs/benchmarks.md, "Beyond these machines: a cost model", shows to be the limit from
about ten machines on). Ray Data then hands shard numbers to a pool of workers, each holding the
encoder once: worker task i reads rows shard i, embeds it and writes `shards/emb_i.npy`. A shard
whose file exists is done, so a killed build rerun continues where it stopped (and the local engine
can finish what Ray started, and the other way round). The driver fits `--fit` and trains the index
once on a sample, as the local build does (the same seeds, the same sample), writes it empty, and
the workers add their shards to copies of it with global ids (`qtsearch.index.parts`:
`add_with_ids`, then `merge_from` in shard order, the autofaiss pattern); graph indexes (HNSW)
cannot be merged and are filled in the driver. Recall tuning and the metadata stage (SQLite,
filled from the Parquet shards, and the BM25 files) run in the driver as in a local build, so
the Ray build gives the same vectors, rows, index and search results as `--engine local`.

Workers write into `<out>.partial/shards/`, so on a cluster of several machines the output
folder must be on a filesystem every node sees (NFS or the like), with the corpus and the
model at the same paths.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qtsearch.core.errors import ModelError, UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.corpus_words import prepare_corpus_words, refines, with_corpus_words
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import parts
from qtsearch.index.faiss_backend import FaissBuilder
from qtsearch.index.transform import TRANSFORM_FILE, VectorTransform
from qtsearch.indexing import shards as shard_files
from qtsearch.indexing.index_stage import IndexStage
from qtsearch.indexing.pipeline import Builder, BuildResult, IndexConfig, build_index, model_spec
from qtsearch.indexing.tokens import shard_ids

if TYPE_CHECKING:
    from qtsearch.encoders.base import IndexEncoder

ENGINES = ("local", "ray")


@dataclass
class RayOptions:
    """Where and how wide a Ray build runs (`--address`, `--workers`, `--gpus-per-worker`)."""

    address: str | None = None  # None: start Ray on this machine; "auto"; "ray://host:10001"
    workers: int | None = None  # None: one per CPU, or one per `gpus_per_worker` GPUs
    gpus_per_worker: float = 0.0


def _ray() -> Any:
    """The `ray` module, or one clear error naming the extra to install."""
    try:
        import ray
        import ray.data  # Ray Data needs pandas: part of the extra
    except ImportError as e:
        raise UsageError(f"--engine ray needs Ray Data ({e.name} is missing): "
                         f"pip install 'qtsearch[ray]'") from None
    return ray


@dataclass
class Pool:
    """The workers of one build: how many, and the CPUs and GPUs each one holds."""

    workers: int
    cpus: float
    gpus: float

    @classmethod
    def size(cls, options: RayOptions, resources: dict[str, float]) -> Pool:
        """Fit the pool to the cluster: --workers (default one per CPU, or one per
        --gpus-per-worker GPUs), each with an equal share of the CPUs (Ray sets a worker's
        OMP_NUM_THREADS to its whole CPUs: one thread each on a 2-core machine with 2 workers)."""
        cpus, gpus = resources.get("CPU", 0.0), resources.get("GPU", 0.0)
        g = options.gpus_per_worker
        if g < 0 or (options.workers is not None and options.workers < 1):
            raise UsageError("--workers must be at least 1 and --gpus-per-worker at least 0")
        if g > gpus:
            raise UsageError(f"--gpus-per-worker {g:g}: the Ray cluster has {gpus:g} GPUs")
        workers = options.workers or max(1, int(gpus // g) if g else int(cpus))
        if g and workers * g > gpus:
            raise UsageError(f"{workers} workers x {g:g} GPUs: the Ray cluster has {gpus:g}")
        if cpus <= 0:
            raise UsageError("the Ray cluster has no CPUs")
        return cls(workers, max(1.0, cpus // workers) if workers <= cpus else cpus / workers, g)

    def args(self, shards: int, actors: bool) -> dict[str, Any]:
        """Ray Data's arguments for a map over `shards` shards on this pool, of actors (state
        kept between shards) or of tasks."""
        data, size = _ray().data, min(self.workers, shards)
        compute = (data.ActorPoolStrategy(size=size) if actors
                   else data.TaskPoolStrategy(size=size))
        return {"batch_size": 1, "compute": compute, "num_cpus": self.cpus,
                "num_gpus": self.gpus or None}


def _over_shards(todo: list[int], **columns: list[Any]) -> Any:
    """A Ray dataset of one row per shard to do (shard number and any per-shard values), one
    block per row, so every shard is its own task."""
    ray = _ray()
    rows = [{"shard": i, **{k: v[n] for k, v in columns.items()}} for n, i in enumerate(todo)]
    return ray.data.from_items(rows, override_num_blocks=max(1, len(rows)))


class EmbedShards:
    """A Ray Data actor: loads the encoder once, then embeds whole shards (rows → vectors)."""

    def __init__(self, model: str | None, fingerprint: str, device: str, precision: str,
                 shards: str, batch_size: int, partial: str):
        encoder = load_encoder(model, device=device, precision=precision)
        if encoder.fingerprint != fingerprint:
            raise ModelError(f"{model}: a Ray worker sees another model (fingerprint "
                             f"{encoder.fingerprint} != {fingerprint})")
        # the corpus words the driver fitted into the partial index: vectors as a local build's
        self.encoder = with_corpus_words(encoder, partial)
        self.shards, self.batch_size = Path(shards), batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rows = []
        for i in batch["shard"]:
            texts = shard_files.read_texts(shard_files.rows_path(self.shards, int(i)))
            vectors = self.encoder.encode(texts, self.batch_size, normalize=True)
            shard_files.write_npy(shard_files.emb_path(self.shards, int(i)),
                                  np.asarray(vectors, dtype=np.float32))
            rows.append(len(texts))
        return {"shard": batch["shard"], "rows": np.asarray(rows)}


def fill_parts(batch: dict[str, np.ndarray], trained: str, shards: str, partial: str,
               gpu: bool) -> dict[str, np.ndarray]:
    """A Ray Data task: add the vectors of each shard (through the build's transform) to a copy
    of the trained index, with the shard's global ids, and write the part."""
    transform = VectorTransform.load(partial)
    for i, first in zip(batch["shard"], batch["first_id"], strict=True):
        x = np.load(shard_files.emb_path(Path(shards), int(i)))
        parts.fill_part(Path(trained), transform.apply(x) if transform else x, int(first),
                        parts.part_path(Path(trained), int(i)), gpu)
    return {"shard": batch["shard"]}


class RayIndexStage(IndexStage):
    """The index stage with the adding done by Ray workers: trained once in the driver on the
    local build's sample, filled in parts, merged in shard order."""

    def __init__(self, builder: RayBuilder, count: int, shards: int):
        super().__init__(builder._vectors, count, shards, builder.reporter, builder.transform)
        self.builder = builder

    def _fill(self, key: str, dim: int, device: str, train_size: int,
              bar: Callable[[float], None]) -> FaissBuilder:
        if not parts.mergeable(FaissBuilder(key, dim, device).index):  # a graph: filled here
            return super()._fill(key, dim, device, train_size, bar)
        index = self._trained(key, dim, device, train_size)
        b = self.builder
        fitted = b.partial / TRANSFORM_FILE
        trained = parts.write_trained(index.index, b.shards,
                                      fitted.read_bytes() if fitted.is_file() else b"")
        for stale in parts.stale_files(trained):
            stale.unlink()
        sizes = [shard_files.shard_rows(shard_files.rows_path(b.shards, i))
                 for i in range(self.shards)]
        firsts = np.cumsum([0, *sizes[:-1]]).tolist()
        todo = [i for i in range(self.shards) if not parts.part_path(trained, i).exists()]
        bar(1 + self.shards - len(todo))
        if todo:
            done = _over_shards(todo, first_id=[firsts[i] for i in todo]).map_batches(
                fill_parts, fn_kwargs={"trained": str(trained), "shards": str(b.shards),
                                       "partial": str(b.partial), "gpu": b.pool.gpus > 0},
                **b.pool.args(len(todo), actors=False))
            for _ in done.iter_rows():
                bar(1)
        index.reserve(self.count)
        parts.merge_parts(index.index, (parts.part_path(trained, i) for i in range(self.shards)))
        return index


class RayBuilder(Builder):
    """A build whose embedding and index filling run on Ray; every other stage is the local
    builder's."""

    def __init__(self, config: IndexConfig, options: RayOptions, reporter: Reporter | None = None):
        super().__init__(config, reporter)
        self.options = options
        self.pool: Pool | None = None

    def _embed(self, encoder: IndexEncoder) -> None:
        c = self.config
        t0 = time.perf_counter()
        count, n_shards = self.state["read"]["count"], self.state["read"]["shards"]
        done = [i for i in range(n_shards)
                if shard_files.emb_path(self.shards, i).exists()]  # a file that exists is whole
        self.state["embedded"] = done
        todo = sorted(set(range(n_shards)) - set(done))
        if refines(encoder):  # the local build's first pass, here in the driver
            with self.reporter.stage("words", count, "sentences") as advance, shard_ids(
                    lambda i: shard_files.read_texts(shard_files.rows_path(self.shards, i)),
                    list(range(n_shards)), count, encoder) as ids:
                prepare_corpus_words(encoder, self.partial, ids, advance)
        with self.reporter.stage("embed", count, "sentences") as advance:
            advance(sum(shard_files.shard_rows(shard_files.rows_path(self.shards, i))
                        for i in done))
            if todo:
                device = "cuda" if self.pool.gpus else c.device
                settings = {"model": model_spec(encoder), "fingerprint": encoder.fingerprint,
                            "device": device, "precision": c.precision,
                            "shards": str(self.shards), "batch_size": c.batch_size,
                            "partial": str(self.partial)}
                embedded = _over_shards(todo).map_batches(
                    EmbedShards, fn_constructor_kwargs=settings,
                    **self.pool.args(len(todo), actors=True))
                for row in embedded.iter_rows():
                    self.state["embedded"].append(int(row["shard"]))
                    self.state.timed("embed", t0)
                    t0 = time.perf_counter()
                    advance(int(row["rows"]))
        self.state.timed("embed", t0)

    def _index_stage(self, count: int, shards: int) -> IndexStage:
        return RayIndexStage(self, count, shards)

    def _manifest(self, encoder: IndexEncoder, corpus: list[dict[str, Any]]) -> dict[str, Any]:
        manifest = super()._manifest(encoder, corpus)
        manifest["build"]["engine"] = {"name": "ray", "workers": self.pool.workers,
                                       "cpus_per_worker": self.pool.cpus,
                                       "gpus_per_worker": self.pool.gpus}
        return manifest

    def run(self) -> BuildResult:
        """Connect to Ray (or start it here), build, and stop Ray again if this build started
        it; a Ray already running in this process (a test's, a notebook's) is used as it is."""
        ray = _ray()
        started = not ray.is_initialized()
        for name in ("ray", "ray.data"):  # our bars and notes say what happens
            logging.getLogger(name).setLevel(logging.ERROR)
        if started:
            ray.init(address=self.options.address, include_dashboard=False,
                     log_to_driver=False, logging_level=logging.ERROR)
        try:
            context = ray.data.DataContext.get_current()
            context.enable_progress_bars = False  # ours show the stages
            context.print_on_execution_start = False
            self.pool = Pool.size(self.options, ray.cluster_resources())
            return super().run()
        finally:
            if started:
                ray.shutdown()


def build_on(engine: str, config: IndexConfig, options: RayOptions | None = None,
             reporter: Reporter | None = None,
             wait: float | None = 0.0) -> BuildResult:
    """Build (or resume building) the index described by `config` here (`local`, options
    left unset) or on a Ray cluster (`ray`)."""
    options = options or RayOptions()
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "local":
        if options != RayOptions():
            raise UsageError("--address, --workers and --gpus-per-worker go with --engine ray")
        return build_index(config, reporter, wait)
    builder = RayBuilder(config, options, reporter)
    builder.wait = wait  # for another writer of the folder (qtsearch.index.lock)
    return builder.run()
