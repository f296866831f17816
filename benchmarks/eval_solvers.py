"""Probe solvers side by side on the same cached vectors: seconds and figures per task.

    python benchmarks/eval_solvers.py [MODEL] [--tasks MR,TREC,SICK-E,SICK-R] [--repeats 3]

Vectors come from the evaluation's disk cache (encoded once if missing); each task runs with
each solver in turn, interleaved over repeats, and the table shows median seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from qtsearch.encoders.registry import resolve_encoders
from qtsearch.evaluation.harness import EmbeddingCache, EvalConfig, load_tasks
from qtsearch.evaluation.solvers import SOLVERS
from qtsearch.evaluation.vector_cache import VectorStore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default="default")
    ap.add_argument("--tasks", default="MR,TREC,SICK-E,SICK-R")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    encoder = resolve_encoders([args.model], device="cpu")[0][0]
    cache = EmbeddingCache(encoder, store=VectorStore.for_encoder(encoder))
    print("| task | solver | median s | figures |\n|---|---|---:|---|")
    for task in load_tasks(EvalConfig(tasks=[args.tasks])):
        cache.prepare(task.sentences())
        times: dict[str, list[float]] = {s: [] for s in SOLVERS}
        figures: dict[str, dict[str, float]] = {}
        for _ in range(args.repeats):
            for solver in SOLVERS:
                task.config.solver = solver
                start = time.perf_counter()
                figures[solver] = task.run(cache)
                times[solver].append(time.perf_counter() - start)
        for solver in SOLVERS:
            shown = "/".join(f"{figures[solver][m]:.4g}" for m in task.headline)
            print(f"| {task.name} | {solver} | {statistics.median(times[solver]):.2f} | {shown} |")


if __name__ == "__main__":
    main()
