"""Which fitted transform and BM25 weight suit a model? Relevance MRR@10 per setting.

For each relevance task (qtsearch.evaluation.relevance) and each `--fit`, the task's pool is
built into an index with that fit as `Index.build` builds one (`build-index`'s code path), and
queried through `Index.search` in semantic mode and in hybrid mode at each BM25 weight. What
wins is what `train/ship_model.py --fit … --lexical-weight …` records in a model folder.

    python benchmarks/search_settings.py MODEL --fits centre whiten:256 \
        --tasks STSB-dev SICK MSRP --weights 0.2 0.3 0.4 0.6
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from qtsearch.core.paths import data_root
from qtsearch.evaluation.relevance.indexes import pool_file
from qtsearch.evaluation.relevance.relevance_run import run_queries
from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.querying import query_encoder
from qtsearch.lifecycle.writers import build_folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="Model folder or encoder name.")
    parser.add_argument("--fits", nargs="+", default=["centre", "whiten:768"])
    parser.add_argument("--tasks", nargs="+", default=["STSB-dev", "SICK", "MSRP"])
    parser.add_argument("--weights", nargs="+", type=float, default=[0.3, 0.6])
    args = parser.parse_args()
    encoder = query_encoder(args.model, device="cpu")
    print("| task | fit | semantic | " + " | ".join(f"hybrid w={w}" for w in args.weights)
          + " |")
    print("|---|---|---:|" + "---:|" * len(args.weights))
    with tempfile.TemporaryDirectory() as tmp:
        for task in load_tasks(RelevanceConfig(tasks=args.tasks), data_root()):
            for fit in args.fits:
                out = Path(tmp) / f"{task.name}-{fit.replace(':', '-')}"
                build_folder(pool_file(task), out, args.model, device="cpu", fit=fit)
                with Index.open(out, model=encoder, device="cpu") as index:
                    cells = [run_queries(index, task, "semantic")["MRR@10"]]
                    for w in args.weights:
                        weighted = replace(index.settings, lexical_weight=w)
                        cells.append(run_queries(index, task, "hybrid",
                                                 settings=weighted)["MRR@10"])
                print(f"| {task.name} | {fit} | " + " | ".join(f"{c:.3f}" for c in cells)
                      + " |", flush=True)


if __name__ == "__main__":
    main()
