"""Benchmark writing an index's BM25 files from its metadata store: every row analysed in this
process against chunks of rows analysed by a worker process per core (what a build does from
qtsearch.index.bm25_terms.PARALLEL_ROWS rows on), taking turns. Prints a Markdown table:
wall and CPU seconds (this process and its workers) per run, and the median.

    python benchmarks/bm25_build.py INDEX_FOLDER --runs 3

The index folder's own files are not touched: the files are written into a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from qtsearch.index import bm25

MODES = {"in this process": 10**15, "a worker process per core": bm25.PARALLEL_ROWS}


def cpu_seconds() -> float:
    """User + system seconds of this process and of the children it has waited for."""
    return sum(getattr(resource.getrusage(who), field)
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for field in ("ru_utime", "ru_stime"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="an index folder (its meta.sqlite is read)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    db = args.index / "meta.sqlite"
    if not db.is_file():
        raise SystemExit(f"bm25_build: {db} not found")
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for _ in range(args.runs):
            for mode, threshold in MODES.items():
                shutil.rmtree(out / bm25.FOLDER, ignore_errors=True)
                bm25.PARALLEL_ROWS = threshold  # write_for's choice between the two
                wall, cpu = time.perf_counter(), cpu_seconds()
                rows = bm25.write_for(out, db)
                times[mode].append((time.perf_counter() - wall, cpu_seconds() - cpu))
    print(f"{rows:,} rows of {db}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}\n")
    print("| analysed | wall s (each run) | median wall s | median CPU s |")
    print("|---|---|---:|---:|")
    for mode, runs in times.items():
        walls = ", ".join(f"{w:.1f}" for w, _ in runs)
        print(f"| {mode} | {walls} | {statistics.median(w for w, _ in runs):.1f} | "
              f"{statistics.median(c for _, c in runs):.1f} |")


if __name__ == "__main__":
    main()
