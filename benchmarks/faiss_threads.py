"""What a second OpenMP thread does for one query to faiss: flat and scalar-quantised scans.

Builds `IndexFlatIP` and `IndexScalarQuantizer` (SQ8) over random unit vectors of the shipped
model's width at each size, then answers lone queries (k = 50, the hybrid search's candidates)
on 1 thread, then on every thread faiss has, and prints the median wall time and
the process's CPU time per query for each. The engine searches a few queries on one thread
whatever the index (`qtsearch.index.faiss_backend.threads_for`) because of what this shows.

    python benchmarks/faiss_threads.py --sizes 7000 100000 1000000
"""

from __future__ import annotations

import argparse
import statistics
import time

import faiss
import numpy as np


def lone_queries(index: faiss.Index, queries: np.ndarray, threads: int,
                 k: int) -> tuple[float, float]:
    """Median wall and mean CPU milliseconds of one query on `threads` OpenMP threads."""
    faiss.omp_set_num_threads(threads)
    index.search(queries[:1], k)  # the thread team started
    walls = []
    cpu = time.process_time()
    for i in range(len(queries)):
        start = time.perf_counter()
        index.search(queries[i : i + 1], k)
        walls.append(time.perf_counter() - start)
    return 1000 * statistics.median(walls), 1000 * (time.process_time() - cpu) / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[7_000, 100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("-k", type=int, default=50)
    args = parser.parse_args()
    most = faiss.omp_get_max_threads()
    rng = np.random.default_rng(0)
    print(f"faiss {faiss.__version__}, {most} threads at most; median wall / CPU ms a query")
    print(f"| rows | index | 1 thread: wall | CPU | {most} threads: wall | CPU |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in args.sizes:
        vectors = rng.standard_normal((n, args.dim), dtype=np.float32)
        faiss.normalize_L2(vectors)
        queries = rng.standard_normal((args.queries, args.dim), dtype=np.float32)
        faiss.normalize_L2(queries)
        for name in ("Flat", "SQ8"):
            index = faiss.index_factory(args.dim, name, faiss.METRIC_INNER_PRODUCT)
            index.train(vectors[:50_000])
            index.add(vectors)
            one, all_ = lone_queries(index, queries, 1, args.k), \
                lone_queries(index, queries, most, args.k)
            print(f"| {n:,} | {name} | {one[0]:.2f} | {one[1]:.2f} | {all_[0]:.2f} | "
                  f"{all_[1]:.2f} |", flush=True)
            del index
        faiss.omp_set_num_threads(most)


if __name__ == "__main__":
    main()
