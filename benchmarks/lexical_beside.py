"""The lexical leg of hybrid search in a thread beside the encoding, or in the caller's thread.

Opens one index as a Python caller does (`qtsearch.Index.open`) and answers each query in
hybrid search twice, one after the other so that both see the same machine: with the lexical
leg in the index's worker thread (`qtsearch.search.searcher.LEGS_BESIDE_FROM` set to 0) and in
the calling thread (set past the index's rows). The hits are the same; prints p50 and p95 of
the wall time and the process's CPU time per query (the worker thread's included) for each.

Queries: one a line or a JSON list from --queries (default: the everyday questions of
benchmarks/everyday/queries.tsv), each asked --rounds times after one warm-up round.

    python benchmarks/lexical_beside.py /tmp/oneshot-1m-cur --queries lady-susan.json --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import qtsearch
from qtsearch.search import searcher

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from query_latency import query_file  # noqa: E402


def read_queries(path: Path | None) -> list[str]:
    if path is None:
        rows = (HERE / "everyday" / "queries.tsv").read_text().splitlines()
        return [r.split("\t")[0] for r in rows if r and not r.startswith("#")]
    return query_file(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--queries", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    queries = read_queries(args.queries)
    ways = {"beside (a thread)": 0, "inline": 1 << 62}
    walls: dict[str, list[float]] = {w: [] for w in ways}
    cpus: dict[str, list[float]] = {w: [] for w in ways}
    with qtsearch.Index.open(args.index) as index:
        for round_ in range(args.rounds + 1):
            for q in queries:
                for way, rows in ways.items():
                    searcher.LEGS_BESIDE_FROM = rows
                    wall, cpu = time.perf_counter(), time.process_time()
                    index.search(q, k=args.k, mode="hybrid")
                    if round_:  # round 0 warms the page cache and the vocabulary
                        walls[way].append(1000 * (time.perf_counter() - wall))
                        cpus[way].append(1000 * (time.process_time() - cpu))
        count = index.info()["count"]
    print(f"{args.index} ({count:,} rows), {len(queries)} queries x {args.rounds} rounds, hybrid, "
          f"k = {args.k}")
    print("| lexical leg | p50 ms wall | p95 ms wall | p50 CPU ms |")
    print("|---|---:|---:|---:|")
    for way in ways:
        ordered = sorted(walls[way])
        print(f"| {way} | {statistics.median(ordered):.2f} | "
              f"{ordered[int(0.95 * (len(ordered) - 1))]:.2f} | "
              f"{statistics.median(cpus[way]):.2f} |")


if __name__ == "__main__":
    main()
