"""What faiss does for a few queries: a second OpenMP thread, and BLAS or its own SIMD scan.

Builds `IndexFlatIP` and `IndexScalarQuantizer` (SQ8) over random unit vectors of the shipped
model's width at each size, then answers lone queries (k = 50, the hybrid search's candidates)
on 1 thread, then on every thread faiss has, and prints the median wall time and
the process's CPU time per query for each. The engine searches a few queries on one thread
whatever the index (`qtsearch.index.faiss_backend.threads_for`) because of what this shows.

Then, on one thread, the flat index answers batches of 1, 2, 3, 4, 8 and 20 queries with
faiss's threshold between its SIMD scan and BLAS at faiss's own default, at 20 (older faiss's
default, counting queries; every batch goes to BLAS where faiss counts queries x dimensions),
and at the engine's setting (`faiss_backend.BLAS_THRESHOLD`, which
importing the engine applies, so the first table runs under it too).

    python benchmarks/faiss_threads.py --sizes 7000 100000 1000000
"""

from __future__ import annotations

import argparse
import statistics
import time

import faiss
import numpy as np

DEFAULT_THRESHOLD = faiss.cvar.distance_compute_blas_threshold  # read before the engine sets it
from qtsearch.index.faiss_backend import BLAS_THRESHOLD, OLD_BLAS_THRESHOLD  # noqa: E402

BATCHES = (1, 2, 3, 4, 8, 20)


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


def per_query(index: faiss.Index, queries: np.ndarray, batch: int, k: int) -> float:
    """Median wall milliseconds a query when `batch` queries are searched in one call."""
    walls = []
    for start in range(0, len(queries) - batch + 1, batch):
        began = time.perf_counter()
        index.search(queries[start : start + batch], k)
        walls.append((time.perf_counter() - began) / batch)
    return 1000 * statistics.median(walls)


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
    flats = {}
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
            if name == "Flat":
                flats[n] = (index, queries)
            del index
        faiss.omp_set_num_threads(most)
    settings = {f"faiss's default ({DEFAULT_THRESHOLD:,})": DEFAULT_THRESHOLD,
                f"{OLD_BLAS_THRESHOLD}": OLD_BLAS_THRESHOLD,
                f"engine ({faiss.cvar.distance_compute_blas_threshold:,})": BLAS_THRESHOLD
                if DEFAULT_THRESHOLD != OLD_BLAS_THRESHOLD else OLD_BLAS_THRESHOLD}
    print("\nFlat, 1 thread: median wall ms a query, by queries a call and threshold")
    print(f"| rows | threshold | {' | '.join(str(b) for b in BATCHES)} |")
    print(f"|---:|---|{'---:|' * len(BATCHES)}")
    faiss.omp_set_num_threads(1)
    for n, (index, queries) in flats.items():
        for label, threshold in settings.items():
            faiss.cvar.distance_compute_blas_threshold = threshold
            cells = [per_query(index, queries, b, args.k) for b in BATCHES]
            print(f"| {n:,} | {label} | {' | '.join(f'{c:.2f}' for c in cells)} |", flush=True)
    faiss.omp_set_num_threads(most)


if __name__ == "__main__":
    main()
