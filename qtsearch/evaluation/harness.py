"""The evaluation harness: tasks behind one interface, a registry, and a run over encoders.

SentEval's split between *prepare* (see every sentence of a task) and *batcher* (turn sentences
into vectors) becomes: a task lists its `sentences()`, the harness embeds them once per encoder
(deduplicated, shared across tasks: SICK-E and SICK-R share their sentences; kept on disk per
model fingerprint, so a second run encodes nothing), and `run(embed)` trains and scores probes
on the vectors. The tasks see each vector L2-normalised, as `Index` builds and queries do: the
figures are those of the vectors the engine searches, for every encoder alike (MiniLM and
model2vec give unit vectors anyway; a mean of words or a GRU does not, and a probe on
[|u−v|, u·v] of raw means had to learn to ignore their lengths, and scored lower on STS-B
dev for the shipped model). `unit_vectors=False` (`eval --raw-vectors`) probes the raw
output instead, SentEval's convention. A task is one class in one module of
`qtsearch.evaluation.tasks`, registered with `@register`; adding one touches one file.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from qtsearch.core.paths import data_root
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import l2_normalize
from qtsearch.evaluation.task_registry import Registry
from qtsearch.evaluation.vector_cache import VectorStore

if TYPE_CHECKING:
    from qtsearch.encoders.base import SentenceEncoder

#: Group order in tables; a task's `group` is also a name usable in `--tasks`.
GROUP_ORDER = ("classification", "pairs", "relatedness", "sts", "retrieval")


@dataclass
class EvalConfig:
    """What one `qtsearch eval` run does (saved in the JSON output beside the figures)."""

    tasks: list[str] = field(default_factory=lambda: ["all"])
    data_dir: str | None = None  # None: $QTSEARCH_DATA or ../shared/data
    limit: int | None = None  # examples per split, drawn at random (quick runs and tests)
    seed: int = 0
    folds: int = 10  # cross-validation folds for MR, CR, SUBJ, MPQA
    books: list[str] | None = None  # next-sentence books; None: Gutenberg 0740–0757
    queries: int = 5000  # next-sentence query sentences (sampled; candidates: all sentences)
    batch_size: int = 256
    solver: str = "lbfgs"  # probes: see qtsearch.evaluation.solvers.SOLVERS
    cache: bool = True  # keep sentence vectors on disk ($QTSEARCH_CACHE/eval/)
    unit_vectors: bool = True  # tasks see L2-normalised vectors (False: the raw output)


class Task(ABC):
    """One evaluation task. `load` reads the data (InputError when it is missing or malformed),
    `sentences` lists every text to embed, `run` scores an encoder through `embed`."""

    name: ClassVar[str]
    group: ClassVar[str]
    #: Metrics shown in tables, in order (e.g. ("acc", "f1")); `run` may return more.
    headline: ClassVar[tuple[str, ...]]
    description: ClassVar[str] = ""

    def __init__(self, config: EvalConfig):
        self.config = config

    @abstractmethod
    def load(self, data_dir: Path) -> None: ...

    @abstractmethod
    def sentences(self) -> list[str]: ...

    @abstractmethod
    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        """Score the encoder behind `embed`; call `tick()` after each unit of slow work."""

    #: Units of work `run` ticks through (for the progress bar).
    def steps(self) -> int:
        return 1


_REGISTRY: Registry[Task] = Registry("qtsearch.evaluation.tasks", GROUP_ORDER)
TASKS = _REGISTRY.tasks
register = _REGISTRY.register
discover = _REGISTRY.discover
task_names = _REGISTRY.names
resolve_tasks = _REGISTRY.resolve


class EmbeddingCache:
    """Vectors of one encoder, each distinct text encoded once per run, and (with a `store`)
    once per model: `prepare` reads a task's vectors from disk or encodes and stores them.
    Calls give them L2-normalised where `unit` (the store keeps the raw output either way)."""

    def __init__(self, encoder: SentenceEncoder, batch_size: int = 256,
                 store: VectorStore | None = None, unit: bool = True):
        self.encoder = encoder
        self.batch_size = batch_size
        self.store = store
        self.unit = unit
        self._rows: dict[str, int] = {}
        self._chunks: list[np.ndarray] = []
        self._matrix: np.ndarray | None = None
        self.seconds = 0.0

    def missing(self, texts: Sequence[str]) -> list[str]:
        """Distinct texts not encoded yet, in first-seen order."""
        return [t for t in dict.fromkeys(texts) if t not in self._rows]

    def add(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> None:
        todo = self.missing(texts)
        if not todo:
            return
        start = time.perf_counter()
        vectors = self.encoder.encode(todo, batch_size=self.batch_size, progress=progress)
        self.seconds += time.perf_counter() - start
        self._append(todo, vectors)

    def _append(self, texts: list[str], vectors: np.ndarray) -> None:
        base = len(self._rows)
        self._rows.update((t, base + i) for i, t in enumerate(texts))
        self._chunks.append(np.asarray(vectors, dtype=np.float32))
        self._matrix = None

    def prepare(self, texts: Sequence[str], progress: Callable[[int], None] | None = None
                ) -> str:
        """Make the vectors of `texts` available: "memory" (all seen this run), "disk" (read
        from the store) or "encoded" (then written to the store)."""
        distinct = list(dict.fromkeys(texts))
        todo = self.missing(distinct)
        stored = self.store.load(distinct) if self.store is not None and todo else None
        if stored is not None:
            keep = {t: i for i, t in enumerate(distinct)}
            self._append(todo, stored[[keep[t] for t in todo]])
            return "disk"
        self.add(todo, progress)
        if self.store is not None and not self.store.path(distinct).exists():
            self.store.save(distinct, self._raw(distinct))
        return "encoded" if todo else "memory"

    def _raw(self, texts: Sequence[str]) -> np.ndarray:
        """The encoder's vectors [len(texts), dim] in the order given (encoding what is
        missing)."""
        self.add(texts)
        if self._matrix is None:
            self._matrix = np.concatenate(self._chunks)
            self._chunks = [self._matrix]
        return self._matrix[[self._rows[t] for t in texts]]

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors the tasks see [len(texts), dim], in the order given."""
        raw = self._raw(texts)
        return l2_normalize(raw) if self.unit else raw


@dataclass
class EncoderRun:
    """The figures of one encoder: {task: {metric: value}} plus timings."""

    name: str
    fingerprint: str
    dim: int
    results: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # per task, encoding included
    vectors: dict[str, str] = field(default_factory=dict)  # per task: encoded, disk or memory
    encode_seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU time of the process (all threads): honest on a busy machine


@dataclass
class EvalRun:
    config: EvalConfig
    tasks: list[type[Task]]
    encoders: list[EncoderRun]

    def to_json(self) -> dict[str, Any]:
        return {
            "results": {e.name: e.results for e in self.encoders},
            "encoders": {e.name: {"fingerprint": e.fingerprint, "dim": e.dim,
                                  "seconds": {k: round(v, 2) for k, v in e.seconds.items()},
                                  "vectors": e.vectors,
                                  "encode_seconds": round(e.encode_seconds, 2),
                                  "cpu_seconds": round(e.cpu_seconds, 2)}
                         for e in self.encoders},
            "config": dataclasses.asdict(self.config),
        }


def load_tasks(config: EvalConfig) -> list[Task]:
    """Instantiate and load the configured tasks (fails on bad data before any encoding)."""
    root = data_root(config.data_dir)
    tasks = [cls(config) for cls in resolve_tasks(config.tasks)]
    for task in tasks:
        task.load(root)
    return tasks


def _unique_names(encoders: Sequence[SentenceEncoder]) -> list[str]:
    names: list[str] = []
    for enc in encoders:
        name, n = enc.name, 2
        while name in names:
            name, n = f"{enc.name}#{n}", n + 1
        names.append(name)
    return names


def _store(encoder: SentenceEncoder, config: EvalConfig) -> VectorStore | None:
    if not config.cache:
        return None
    try:
        return VectorStore.for_encoder(encoder)
    except OSError:  # an unwritable cache folder costs speed, never the run
        return None


def evaluate(encoders: Sequence[SentenceEncoder], config: EvalConfig,
             reporter: Reporter | None = None, tasks: list[Task] | None = None) -> EvalRun:
    """Run every configured task for every encoder, reporting a stage while a task encodes and
    one while it fits, then a note per task with its time."""
    tasks = tasks if tasks is not None else load_tasks(config)
    reporter = reporter or Reporter()
    runs = []
    with reporter:
        for enc, name in zip(encoders, _unique_names(encoders), strict=True):
            cache = EmbeddingCache(enc, config.batch_size, _store(enc, config),
                                   config.unit_vectors)
            run = EncoderRun(name, enc.fingerprint, enc.dim)
            cpu = time.process_time()
            for task in tasks:
                start = time.perf_counter()
                with reporter.stage(f"{name} · {task.name}: vectors",
                                    len(cache.missing(task.sentences())) or None,
                                    keep=False) as bar:
                    run.vectors[task.name] = cache.prepare(task.sentences(), bar)
                with reporter.stage(f"{name} · {task.name}", task.steps(), keep=False) as bar:
                    run.results[task.name] = task.run(cache, tick=lambda bar=bar: bar(1))
                run.seconds[task.name] = time.perf_counter() - start
                reporter.note(f"{name} · {task.name}: {run.seconds[task.name]:.1f} s"
                              f" (vectors: {run.vectors[task.name]})")
            run.encode_seconds = cache.seconds
            run.cpu_seconds = time.process_time() - cpu
            runs.append(run)
    return EvalRun(config, [type(t) for t in tasks], runs)
