"""What one search request costs the server, per unit of what it asks: the CPU seconds of a
query, of each passage its first fetch ranks, and of each text a re-ranker encodes, beside the
figures `qtsearch serve` assumes when it refuses a request sure to miss its deadline
(qtsearch.app.serve.request_limits.least_seconds).

Queries run one `Index.search` each, as the server answers a request's queries (one bad query
fails alone), one thread, CPU time of the process (`time.process_time`); per-passage cost is
the slope between two depths of first fetch, per-query cost what is left at the smaller one.

    python benchmarks/request_cost.py INDEX --queries queries.json [--rerank minilm]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from qtsearch.core.errors import InputError

if TYPE_CHECKING:
    from qtsearch import Index


def cpu_seconds(fn, reps: int) -> float:
    """Median CPU seconds of `fn()` after one warm-up."""
    fn()
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def answer_each(index: Index, queries: list[str], k: int) -> None:
    """Each query searched on its own, a refused one (no known word) passed over."""
    for q in queries:
        with contextlib.suppress(InputError):
            index.search(q, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path)
    ap.add_argument("--queries", type=Path, required=True, help="a JSON list of query strings")
    ap.add_argument("-n", type=int, default=50, help="queries per measurement")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rerank", default=None, help="also time this re-ranker (e.g. minilm)")
    args = ap.parse_args()

    from qtsearch import Index, Reranker
    from qtsearch.app.serve.request_limits import (
        SECONDS_PER_PASSAGE,
        SECONDS_PER_QUERY,
        SECONDS_PER_RERANKED_TEXT,
    )
    from qtsearch.lifecycle.querying import first_fetch

    queries = json.loads(args.queries.read_text(encoding="utf-8"))[:args.n]
    with Index.open(args.index, device="cpu") as idx:
        depths = {k: first_fetch(k, "passage", len(idx)) for k in (10, 1000)}
        cost = {k: cpu_seconds(lambda k=k: answer_each(idx, queries, k), args.reps)
                / len(queries) for k in depths}
        per_passage = (cost[1000] - cost[10]) / (depths[1000] - depths[10])
        per_query = cost[10] - depths[10] * per_passage
        rows = [("query (k=10 less its passages)", per_query, SECONDS_PER_QUERY),
                ("passage of the first fetch", per_passage, SECONDS_PER_PASSAGE)]
        if args.rerank:
            reranker = Reranker(args.rerank, depth=30)
            texts = [h.text for h in idx.search(queries[0], 30)]
            per_text = cpu_seconds(lambda: reranker.encoder.encode(texts), args.reps) / 30
            rows.append((f"text re-ranked ({args.rerank})", per_text, SECONDS_PER_RERANKED_TEXT))
        print(f"{len(queries)} queries on {args.index} ({len(idx):,} rows), hybrid; CPU "
              f"seconds of this process, median of {args.reps}")
    print()
    print("| unit | measured CPU ms | assumed by the server, ms |")
    print("|---|---:|---:|")
    for name, got, assumed in rows:
        print(f"| {name} | {1e3 * got:.3f} | {1e3 * assumed:.3f} |")


if __name__ == "__main__":
    main()
