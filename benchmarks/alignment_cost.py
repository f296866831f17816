"""What word alignment costs a query: lone queries with it and without, taking turns.

Opens one index as a Python caller does (`qtsearch.Index.open`) and answers each query in
semantic and hybrid search with the index's own settings (word alignment on: its first 30 hits
re-scored, qtsearch.search.alignment) and with `alignment=0`, one after the other, query after
query, so that both see the same machine. Prints p50 and p95 of the wall time and the process's
CPU time per query, and how often the two settings agree on the first hit.

Queries: the everyday questions and statements of benchmarks/everyday/queries.tsv, or one a
line from --queries; each asked --rounds times after one warm-up round.

    python benchmarks/alignment_cost.py /tmp/oneshot-1m-cur --rounds 10
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import qtsearch

HERE = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--queries", type=Path, default=None,
                        help="One query a line (default: the everyday questions).")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    if args.queries is None:
        rows = (HERE / "everyday" / "queries.tsv").read_text().splitlines()
        queries = [r.split("\t")[0] for r in rows if r and not r.startswith("#")]
    else:
        queries = [q for q in args.queries.read_text().splitlines() if q.strip()]
    with qtsearch.Index.open(args.index) as index:
        settings = {"aligned": index.settings,
                    "alignment=0": dataclasses.replace(index.settings, alignment=0.0)}
        cells = {(m, s): ([], []) for m in ("semantic", "hybrid") for s in settings}
        same = dict.fromkeys(("semantic", "hybrid"), 0)
        for round_ in range(args.rounds + 1):
            for q in queries:
                for mode in ("semantic", "hybrid"):
                    firsts = []
                    for name, chosen in settings.items():
                        wall, cpu = time.perf_counter(), time.process_time()
                        hits = index.search(q, k=args.k, mode=mode, settings=chosen)
                        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                        firsts.append(hits[0].id if hits else None)
                        if round_:  # round 0 warms the page cache and the vocabulary
                            cells[mode, name][0].append(1000 * wall)
                            cells[mode, name][1].append(1000 * cpu)
                    same[mode] += round_ == 1 and firsts[0] == firsts[1]
    print(f"{args.index}: {len(index):,} rows, {len(queries)} queries x {args.rounds} rounds, "
          f"k={args.k}")
    print("| mode | settings | p50 ms wall | p95 ms wall | p50 CPU ms |")
    print("|---|---|---:|---:|---:|")
    for (mode, name), (wall, cpu) in cells.items():
        print(f"| {mode} | {name} | {statistics.median(wall):.2f} | "
              f"{percentile(wall, 0.95):.2f} | {statistics.median(cpu):.2f} |")
    for mode, n in same.items():
        print(f"{mode}: the same first hit with and without alignment for {n} of "
              f"{len(queries)} queries")


if __name__ == "__main__":
    main()
