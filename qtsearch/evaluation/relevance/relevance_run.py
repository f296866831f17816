"""Systems side by side: for each task, one index per model, every chosen mode searched on it.

A system is a model (the shipped one, a model folder, or an encoder name: glove, minilm,
model2vec) and a search mode of `Index.search`, optionally with a re-ranker (`MODE+minilm`:
the first RERANK_DEPTH hits re-scored, `qtsearch.Reranker`; `MODE+minilm@10`: the first
10). Lexical mode (BM25 over the index's BM25 files) does not depend on the model, so it
is one system, "BM25 (lexical)", searched on the first model's index.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtsearch.core.errors import InputError, UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.registry import load_encoder
from qtsearch.evaluation.relevance.indexes import open_task_index
from qtsearch.evaluation.relevance.tasks_base import (
    GROUP_ORDER,
    METRICS,
    K,
    RelevanceConfig,
    RelevanceTask,
    mean_metrics,
    query_metrics,
)
from qtsearch.lifecycle import Index, Reranker, SearchSettings
from qtsearch.lifecycle.on_disk import Manifest
from qtsearch.lifecycle.querying import query_encoder
from qtsearch.search.defaults import MODES, RERANK_DEPTH

log = logging.getLogger("qtsearch")

LEXICAL = "lexical"
#: Queries per `Index.search_many` call.
QUERY_BATCH = 256


@dataclass(frozen=True)
class System:
    """A model searched in one mode."""

    model: str  # "default", a model folder, or an encoder name
    mode: str
    rerank: str | None = None  # the re-ranker's encoder, or None
    depth: int = RERANK_DEPTH  # hits it re-scores

    @property
    def label(self) -> str:
        at = f"@{self.depth}" if self.depth != RERANK_DEPTH else ""
        then = f"+{self.rerank}{at}" if self.rerank else ""
        if self.mode == LEXICAL:
            return f"BM25 (lexical){then}"
        name = Path(self.model).name if "/" in self.model else self.model
        return f"{name} · {self.mode}{then}"


def parse_systems(models: Sequence[str], baselines: Sequence[str],
                  explicit: Sequence[str] = ()) -> list[System]:
    """`explicit` MODEL:MODE[+RERANKER] specs (MODEL alone: semantic), or else every mode of
    each of `models` and the semantic mode of each baseline encoder; each label once, in
    order."""
    systems: list[System] = []
    if explicit:
        for spec in explicit:
            model, _, mode = spec.rpartition(":") if ":" in spec else (spec, "", "semantic")
            mode, _, rerank = mode.partition("+")
            rerank, _, depth = rerank.partition("@")
            if mode not in MODES:
                raise UsageError(f"--systems {spec!r}: mode must be one of {', '.join(MODES)}")
            if depth and not (depth.isdigit() and int(depth) > 0):
                raise UsageError(f"--systems {spec!r}: the depth after @ must be a positive "
                                 "whole number")
            systems.append(System(model or "default", mode, rerank or None,
                                  int(depth) if depth else RERANK_DEPTH))
    else:
        systems = [System(m, mode) for m in models for mode in MODES]
        for b in baselines:  # NAME (semantic) or NAME:MODE
            model, _, mode = b.partition(":")
            if mode and mode not in MODES:
                raise UsageError(f"--baselines {b!r}: mode must be one of {', '.join(MODES)}")
            systems.append(System(model, mode or "semantic"))
    if not systems:
        raise UsageError("no system to evaluate: give --model, --baselines or --systems")
    first: dict[str, System] = {}
    for s in systems:
        first.setdefault(s.label, s)
    return list(first.values())


def _model_arg(model: str) -> str | None:
    return None if model == "default" else model


@dataclass
class RelevanceRun:
    """Figures of one run: {task: {system label: {metric: value, ...}}} and what was built."""

    config: RelevanceConfig
    tasks: list[RelevanceTask]
    systems: list[System]
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)  # "task|encoder name"

    def group_mean(self, group: str = GROUP_ORDER[0]) -> dict[str, dict[str, float]]:
        """Per system, each metric averaged over the tasks of `group` (tasks weigh equally)."""
        names = [t.name for t in self.tasks if t.group == group]
        if not names:
            return {}
        return {s.label: {m: sum(self.results[t][s.label][m] for t in names) / len(names)
                          for m in METRICS}
                for s in self.systems}

    def to_json(self) -> dict[str, Any]:
        return {
            "results": self.results,
            "mean_paraphrase": self.group_mean(),
            "tasks": {t.name: {"group": t.group, "description": t.description,
                               "pool": len(t.pool), "queries": len(t.queries)}
                      for t in self.tasks},
            "systems": [{"label": s.label, "model": s.model, "mode": s.mode}
                        for s in self.systems],
            "builds": self.builds,
            "config": dataclasses.asdict(self.config),
        }


class WarningCounter(logging.Filter):
    """Counts (and holds back) the qtsearch warnings of a query loop: one line per query about
    unknown words would bury the progress bar; the count and an example go in the notes."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.example = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        self.count += 1
        self.example = self.example or record.getMessage()
        return False

    @contextlib.contextmanager
    def attached(self) -> Iterator[WarningCounter]:
        log.addFilter(self)
        try:
            yield self
        finally:
            log.removeFilter(self)


def run_queries(index: Index, task: RelevanceTask, mode: str,
                advance: Callable[[int], None] | None = None,
                rerank: Reranker | None = None,
                settings: SearchSettings | None = None) -> dict[str, Any]:
    """Every query of `task` through `index.search` (with `settings`: None, the index's own);
    a query the index refuses (InputError: e.g. no known word) is a miss, counted in
    `failed`; warnings are counted."""
    with WarningCounter().attached() as warnings:
        cell = _run_queries(index, task, mode, advance, rerank, settings)
    return {**cell, "warnings": warnings.count, "warning_example": warnings.example}


def _run_queries(index: Index, task: RelevanceTask, mode: str,
                 advance: Callable[[int], None] | None,
                 rerank: Reranker | None, settings: SearchSettings | None) -> dict[str, float]:
    scores, failed = [], 0
    start = time.perf_counter()
    for s in range(0, len(task.queries), QUERY_BATCH):
        batch = task.queries[s : s + QUERY_BATCH]
        texts = [task.pool[q.row] for q in batch]
        try:
            hits = index.search_many(texts, K + 1, mode, rerank=rerank, settings=settings)
        except InputError:
            hits = []
            for text in texts:
                try:
                    hits.append(index.search(text, K + 1, mode, rerank=rerank,
                                             settings=settings))
                except InputError:
                    hits.append([])
                    failed += 1
        for q, found in zip(batch, hits, strict=True):
            ranked = [h.id for h in found if h.id != q.row]
            scores.append(query_metrics(ranked, q.relevant))
        if advance:
            advance(len(batch))
    seconds = time.perf_counter() - start
    return {**mean_metrics(scores), "queries": float(len(scores)), "failed": float(failed),
            "query_seconds": seconds}


def run_benchmark(tasks: Sequence[RelevanceTask], systems: Sequence[System],
                  config: RelevanceConfig, device: str = "auto", rebuild: bool = False,
                  reporter: Reporter | None = None) -> RelevanceRun:
    """Build (or reuse) each task's index per model and score every system on it."""
    reporter = reporter or Reporter()
    run = RelevanceRun(config, list(tasks), list(systems))
    lexical_on = next((s.model for s in systems if s.mode != LEXICAL), systems[0].model)
    by_model: dict[str, list[System]] = {}
    for s in systems:
        by_model.setdefault(lexical_on if s.mode == LEXICAL else s.model, []).append(s)
    encoders = {m: query_encoder(_model_arg(m), device) for m in by_model}  # one load each
    rerank_encoders = {s.rerank: load_encoder(s.rerank, device, order_only=True)
                       for s in systems if s.rerank}
    rerankers = {(s.rerank, s.depth): Reranker(rerank_encoders[s.rerank], s.depth)
                 for s in systems if s.rerank}
    for task in tasks:
        run.results[task.name] = {}
        for model, chosen in by_model.items():
            encoder = encoders[model]
            name = encoder.name
            reporter.note(f"{task.name}: index of {len(task.pool):,} sentences, {name}")
            start = time.perf_counter()
            index, built = open_task_index(task, encoder, _model_arg(model), device, rebuild,
                                           reporter)
            with index:
                manifest = Manifest.read(index.path)
                run.builds[f"{task.name}|{name}"] = {
                    "built": built, "seconds": round(time.perf_counter() - start, 2),
                    "sentences": manifest.count, "embed_seconds": manifest.stages["embed"],
                    "transform": manifest.fit}
                for s in chosen:
                    with reporter.stage(f"{task.name} · {s.label}", len(task.queries),
                                        keep=False) as bar:
                        run.results[task.name][s.label] = run_queries(
                            index, task, s.mode, bar, rerankers.get((s.rerank, s.depth)))
    return run
