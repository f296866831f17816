"""Relevance tasks behind one interface, their registry, and the ranking metrics.

A task is one class in one module of `qtsearch.evaluation.relevance.tasks`, registered with
`@register`: `load` fills `pool` (distinct sentences; row i becomes index id i) and `queries`
(a pool row and the pool rows relevant to it). Queries are pool sentences, so every system
finds the query itself first; that row is dropped from its hits before scoring.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.evaluation.task_registry import Registry

#: Hits scored per query.
K = 10
#: All metrics computed per query; `R@k` is the share of queries with a relevant sentence
#: among the first k hits (one relevant sentence per query for most paraphrase queries).
METRICS = ("R@1", "R@10", "MRR@10", "P@10")
#: Group order in tables; a group name also works in `--tasks`.
GROUP_ORDER = ("paraphrase", "topical")


@dataclass(frozen=True)
class Query:
    """A query: its row in the pool, and the rows that count as relevant answers."""

    row: int
    relevant: frozenset[int]


@dataclass
class RelevanceConfig:
    """What one `qtsearch bench relevance` run reads (saved in the JSON output)."""

    tasks: Sequence[str] = ("all",)
    data_dir: str | None = None  # None: $QTSEARCH_DATA or ../shared/data
    limit: int | None = None  # rows of each task file, drawn at random (quick runs and tests)
    seed: int = 0


class RelevanceTask(ABC):
    """One retrieval task over one pool of sentences."""

    name: ClassVar[str]
    group: ClassVar[str]
    description: ClassVar[str] = ""
    #: Metrics shown in tables, in order.
    headline: ClassVar[tuple[str, ...]] = ("R@1", "R@10", "MRR@10")

    def __init__(self, config: RelevanceConfig):
        self.config = config
        self.pool: list[str] = []
        self.queries: list[Query] = []

    @abstractmethod
    def load(self, data_dir: Path) -> None:
        """Fill `pool` and `queries` (InputError when the data is missing or malformed)."""

    def set_pool(self, texts: Iterable[str]) -> dict[str, int]:
        """The distinct sentences of `texts` as the pool, in first-seen order; their rows."""
        self.pool = list(dict.fromkeys(t for t in texts if t))
        if len(self.pool) <= K:
            raise InputError(f"{self.name}: only {len(self.pool)} distinct sentences; the "
                             f"pool must hold more than {K}")
        return {t: i for i, t in enumerate(self.pool)}

    def pair_queries(self, pairs: Iterable[tuple[str, str]], rows: dict[str, int]) -> None:
        """Queries from relevant pairs (a, b), both ways: a finds b, b finds a; a sentence
        paired with several others has all of them as relevant answers."""
        relevant: dict[int, set[int]] = {}
        for a, b in pairs:
            ra, rb = rows[a], rows[b]
            if ra != rb:
                relevant.setdefault(ra, set()).add(rb)
                relevant.setdefault(rb, set()).add(ra)
        self.queries = [Query(r, frozenset(rel)) for r, rel in sorted(relevant.items())]
        if not self.queries:
            raise InputError(f"{self.name}: no relevant pair in the data")


_REGISTRY: Registry[RelevanceTask] = Registry("qtsearch.evaluation.relevance.tasks",
                                              GROUP_ORDER, "relevance task")
TASKS = _REGISTRY.tasks
register = _REGISTRY.register
discover = _REGISTRY.discover
task_names = _REGISTRY.names
resolve_tasks = _REGISTRY.resolve


def load_tasks(config: RelevanceConfig, data_dir: Path) -> list[RelevanceTask]:
    """Instantiate and load the configured tasks (bad data fails before any index is built)."""
    tasks = [cls(config) for cls in resolve_tasks(config.tasks)]
    for task in tasks:
        task.load(data_dir)
    return tasks


def query_metrics(hits: Sequence[int], relevant: frozenset[int], k: int = K
                  ) -> dict[str, float]:
    """The metrics of one query from its ranked hit rows (the query's own row removed)."""
    top = list(hits[:k])
    good = [h in relevant for h in top]
    first = good.index(True) + 1 if any(good) else None
    return {"R@1": float(first == 1), "R@10": float(first is not None),
            "MRR@10": 1.0 / first if first else 0.0, "P@10": sum(good) / k}


def mean_metrics(per_query: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each metric averaged over queries."""
    return {m: float(np.mean([q[m] for q in per_query])) for m in METRICS}
