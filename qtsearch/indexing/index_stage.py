"""The index stage of a build: choose the faiss index type, train it on a sample of the
corpus vectors, fill it shard by shard, then measure (and tune) its recall against exact search.

Shared by `build-index` (vectors from the embedded shards) and derived builds (vectors from a
flat index), so a derived index is the one `build-index --index TYPE` would make (with the
source's `--fit`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.progress import Reporter
from qtsearch.index.choose import TARGET_RECALL, choose_index
from qtsearch.index.faiss_backend import (
    FaissBuilder,
    apply_search_params,
    resolve_faiss_device,
)
from qtsearch.index.recall import exact_neighbours, measure_recall, tune_search
from qtsearch.index.transform import VectorTransform
from qtsearch.indexing.shards import sample_rows

#: Queries sampled from the corpus to tune nprobe / efSearch, and k of the recall target.
TUNE_QUERIES = 500
TUNE_K = 10
_SEED = 0


def manifest_fields(info: dict[str, Any]) -> dict[str, Any]:
    """The manifest's keys that describe the index, from the stage's record."""
    return {"index_type": info["type"], "index_key": info["key"],
            "index_params": info["params"]}


def build_fields(info: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `build` keys that say how the index was chosen and how well it recalls."""
    return {"why": info["why"], "recall": info["recall"], "faiss_device": info["device"],
            **({"tune_s": info["tune_s"]} if "tune_s" in info else {}),
            **({"graph_nodes": info["nodes"]} if "nodes" in info else {})}


class IndexStage:
    """`source()` yields the corpus vectors in id order, in `shards` pieces (`count` in all);
    the index holds them through `transform` (the fitted one, if any)."""

    def __init__(self, source: Callable[[], Iterator[np.ndarray]], count: int, shards: int,
                 reporter: Reporter, transform: VectorTransform | None = None):
        self.source, self.count, self.shards, self.reporter = source, count, shards, reporter
        self.transform = transform

    def _out(self, x: np.ndarray) -> np.ndarray:
        return self.transform.apply(x) if self.transform is not None else x

    def vectors(self) -> Iterator[np.ndarray]:
        """The vectors the index holds, shard by shard."""
        return map(self._out, self.source())

    def sample(self, size: int, seed: int) -> np.ndarray:
        """`size` corpus vectors chosen at random (fixed seed: reruns train the same index),
        the very floats that are added, so a derived index equals the direct build: taken after
        the transform (a matmul of the sample alone can differ in the last bits), or before
        it where it works row by row (`by_row`), which spares transforming every shard."""
        if self.transform is None or self.transform.by_row:
            return self._out(sample_rows(self.source(), self.count, size, seed))
        return sample_rows(self.vectors(), self.count, size, seed)

    def _trained(self, key: str, dim: int, device: str, train_size: int) -> FaissBuilder:
        """An empty index trained on a fixed-seed sample (reruns and the Ray engine train the
        same one)."""
        builder = FaissBuilder(key, dim, device)
        if builder.needs_training:
            builder.train(self.sample(max(train_size, 1), _SEED))
        return builder

    def _fill(self, key: str, dim: int, device: str, train_size: int,
              bar: Callable[[float], None]) -> FaissBuilder:
        """A trained index of every shard (train on a fixed-seed sample, add shard by shard)."""
        builder = self._trained(key, dim, device, train_size)
        builder.reserve(self.count)
        bar(1)
        for vectors in self.vectors():
            builder.add(np.asarray(vectors))
            bar(1)
        return builder

    def run(self, dim: int, requested: str, device: str, path: Path) -> dict[str, Any]:
        """Choose, build, then measure (and tune) recall@10 against exact search on corpus
        queries; an 8-bit scalar quantizer that misses the target is rebuilt with fp16. Writes
        the index to `path`; returns the build state's record of it."""
        n, shards = self.count, self.shards
        choice = choose_index(n, dim, requested)
        self.reporter.note(f"index: {choice.index_type} ({choice.key}): {choice.why}")
        device = resolve_faiss_device(device)
        params: dict[str, Any] = {}
        quality: dict[str, Any] = {}
        tune_s: float | None = None
        key, why = choice.key, choice.why
        with self.reporter.stage("index", shards + 2, "steps") as bar:
            builder = self._fill(key, dim, device, choice.train_size, bar)
            if choice.index_type != "flat":
                tune_start = time.perf_counter()  # the manifest says what tuning cost
                queries = self.sample(TUNE_QUERIES, _SEED + 1)
                truth = exact_neighbours(queries, self.vectors(), min(TUNE_K, n))
                if choice.tune:
                    params, recall = tune_search(
                        builder.index, choice.tune, choice.candidates, queries, truth,
                        TARGET_RECALL, choice.outer, choice.outer_candidates, builder.fold)
                else:
                    recall = measure_recall(builder.index, params, queries, truth, builder.fold)
                if recall < TARGET_RECALL and choice.fallback_key:
                    why += (f"; {key} reached recall@{truth.k} {recall:.3f} < "
                            f"{TARGET_RECALL} on these vectors, so rebuilt as "
                            f"{choice.fallback_key}")
                    self.reporter.note(f"index: {key} recall@{truth.k} {recall:.3f} < "
                                       f"{TARGET_RECALL}: rebuilding as {choice.fallback_key}")
                    key = choice.fallback_key
                    bar.grow(shards + 1)
                    builder = self._fill(key, dim, device, choice.train_size, bar)
                    if choice.tune:  # the finer codes reach the target at another setting
                        params, recall = tune_search(
                            builder.index, choice.tune, choice.candidates, queries, truth,
                            TARGET_RECALL, choice.outer, choice.outer_candidates, builder.fold)
                    else:
                        recall = measure_recall(builder.index, params, queries, truth,
                                                builder.fold)
                if recall < TARGET_RECALL:
                    self.reporter.note(
                        f"index: warning: {key} reaches recall@{truth.k} {recall:.3f} at "
                        f"best (target {TARGET_RECALL}); these vectors are hard to tell apart, "
                        f"--index flat is exact", warn=True)
                quality = {f"recall@{truth.k}": round(recall, 4),
                           "queries": int(queries.shape[0]), "target": TARGET_RECALL}
                tune_s = round(time.perf_counter() - tune_start, 2)
            bar(1)
        apply_search_params(builder.index, params)
        builder.write(path)
        fold = builder.fold
        if fold is not None and fold.nodes < fold.rows:
            self.reporter.note(f"index: {fold.rows:,} vectors, {fold.nodes:,} distinct: "
                               f"copies share one graph node")
        return {"requested": requested, "type": choice.index_type, "key": key,
                "params": params, "why": why, "recall": quality, "device": device,
                **({"tune_s": tune_s} if tune_s is not None else {}),
                **({"nodes": fold.nodes} if fold is not None else {})}
