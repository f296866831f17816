"""Which fusion should hybrid search use? Paraphrase retrieval through the engine, per method.

Each task of the relevance benchmark (qtsearch.evaluation.relevance: pool = all sentences of
the split, queries = sentences with a paraphrase of gold >= 4) is built into an index with
`build-index`'s code path (cached, shared with `qtsearch bench relevance`) and queried through
`Index.search` in semantic and lexical mode, and in hybrid mode with each fusion: convex
(z-normalised BM25 and cosine over the union of both legs' top 50, BM25 weighted by --weights;
a lexical-only candidate's cosine read from the index), convex-floor (the same, a missing
cosine set to the leg's lowest instead) and rrf (reciprocal rank, k = 60). Prints MRR@10,
R@1 and R@10.

    python benchmarks/fusion.py --tasks STSB-dev SICK MSRP [--model MODEL]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from qtsearch.core.paths import data_root
from qtsearch.evaluation.relevance.indexes import open_task_index
from qtsearch.evaluation.relevance.relevance_run import run_queries
from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.querying import query_encoder

#: (label, mode, fusion, whether a lexical-only candidate's cosine is read from the index,
#: the convex fusion's BM25 weight)
WEIGHTS = (0.2, 0.4, 0.5, 0.6, 0.7)


def systems(weights: tuple[float, ...] = WEIGHTS) -> list[tuple]:
    return [("semantic", "semantic", None, True, None),
            ("lexical (BM25)", "lexical", None, True, None),
            ("hybrid rrf", "hybrid", "rrf", True, None),
            *((f"hybrid convex w={w}", "hybrid", "convex", True, w) for w in weights),
            ("hybrid convex-floor w=0.6", "hybrid", "convex", False, 0.6)]


def evaluate(index: Index, task, mode: str, fusion: str | None, exact_cosine: bool,
             weight: float | None) -> dict:
    settings = replace(index.settings, fusion=fusion or index.settings.fusion,
                       lexical_weight=index.settings.lexical_weight if weight is None else weight)
    reconstruct = index.backend.reconstruct
    if not exact_cosine:  # convex-floor: a backend that keeps no vectors floors the cosine
        index.backend.reconstruct = lambda ids: None  # type: ignore[method-assign]
    try:
        return run_queries(index, task, mode, settings=settings)
    finally:
        index.backend.reconstruct = reconstruct  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["STSB-dev"])
    parser.add_argument("--model", default=None, help="Model folder or encoder name "
                                                      "(default: the shipped model).")
    parser.add_argument("--json", type=Path, help="Write the figures here too.")
    parser.add_argument("--weights", nargs="+", type=float, default=list(WEIGHTS),
                        help="BM25 weights of the convex fusion to compare.")
    args = parser.parse_args()
    encoder = query_encoder(args.model, device="cpu")
    tasks = load_tasks(RelevanceConfig(tasks=args.tasks), data_root())
    chosen = systems(tuple(args.weights))
    report: dict[str, dict[str, dict[str, float]]] = {}
    for task in tasks:
        index, _ = open_task_index(task, encoder, args.model, device="cpu")
        with index:
            report[task.name] = {label: evaluate(index, task, *how)
                                 for label, *how in chosen}
        print(f"\n{task.name}: {len(task.queries)} queries, pool {len(task.pool)}",
              file=sys.stderr)
    print("| system | " + " | ".join(f"{t} MRR@10 / R@1 / R@10" for t in report) + " |")
    print("|---|" + "---|" * len(report))
    for label, *_ in chosen:
        cells = [f"{r[label]['MRR@10']:.3f} / {r[label]['R@1']:.3f} / {r[label]['R@10']:.3f}"
                 for r in report.values()]
        print(f"| {label} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
