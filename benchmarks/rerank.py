"""What `--rerank minilm` costs a query: the re-ranker's load, then each query's re-scoring at
several depths, in warm processes (as `shell` and `serve`, which keep the model loaded; one per
pass over the queries), and a one-shot `qtsearch search --rerank minilm` end to end.

The index is one real book (default: Emma, split into sentences, built once under --work with
the shipped model); the queries are the eight everyday sentences of docs/benchmarks.md ("Eight
everyday queries on Emma"). Each query's first stage (the default hybrid mode, `depth` hits) is
found once; what is timed is the re-ranker alone: MiniLM encoding the query and the hits' texts
in one call, then the ordering. Depths are interleaved query by query so every depth sees the
same load. Prints p50 and p90 per depth, the load time, and the one-shot command's median wall
time.

`--runtimes torch onnx int8` measures each way of running MiniLM's small calls (torch, ONNX
Runtime's float graph, its int8 copy; "auto" is the float choice of `MiniLM()`, and
`--rerank minilm` loads int8 where ONNX Runtime is installed): each pass over the queries
runs in a process of its own, the runtimes taking turns, and the load is each process's. It
then compares each query's re-ranked order of all `depth` hits under every runtime (printing
any difference) and gives the least cosine between their vectors.

    python benchmarks/rerank.py --repeats 5
    python benchmarks/rerank.py --repeats 5 --runtimes torch onnx int8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from qtsearch.encoders.baselines import RUNTIMES, MiniLM

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO.parent / "shared" / "data" / "gutenberg" / "0003-austen-jane--emma.txt.gz"
QUERIES = [
    "It rained hard all morning and the roads were wet.",
    "She had very little money and was poor.",
    "He was furious and spoke angrily.",
    "She received a letter and read it eagerly.",
    "The doctor came to see the sick old man.",
    "They danced together at the ball.",
    "He asked her to marry him.",
    "It was a cold winter and snow lay on the ground.",
]


def quantiles(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{1000 * statistics.median(ordered):.0f} | {1000 * p90:.0f}"


def compare(rerankers: dict, first: dict) -> None:
    """Each query's re-ranked order of all its hits, at each depth, under every runtime against
    the first runtime's; and the least cosine between the runtimes' vectors of those texts."""
    (base_name, base), *others = rerankers.items()
    least, differ = 1.0, 0
    for depth, found in first.items():
        for query, hits in zip(QUERIES, found, strict=True):
            want = [h.id for h in base([query], [hits], depth)[0]]
            texts = [query, *(h.text for h in hits)]
            v = base.encoder.encode(texts, normalize=True)
            for name, other in others:
                got = [h.id for h in other([query], [hits], depth)[0]]
                if got != want:
                    differ += 1
                    print(f"depth {depth}, {query!r}: {name} {got} != {base_name} {want}")
                u = other.encoder.encode(texts, normalize=True)
                least = min(least, float(np.min(np.einsum("ij,ij->i", u, v))))
    print(f"re-ranked orders: {differ} differ among {len(QUERIES) * len(first)} per runtime; "
          f"least cosine between runtimes {least:.7f}\n")


#: The benchmark's runtimes: MiniLM's, and "int8" (ONNX Runtime's int8 graph, the re-ranker's).
BENCH_RUNTIMES = (*RUNTIMES, "int8")


def minilm(runtime: str) -> MiniLM:
    return MiniLM("cpu", runtime="onnx", int8=True) if runtime == "int8" \
        else MiniLM("cpu", runtime=runtime)


def timed(args: argparse.Namespace, runtime: str, index: Path) -> dict:
    """One process's measurement of one runtime: its load, warm-up and each re-ranking's
    seconds by depth."""
    import qtsearch

    t0 = time.perf_counter()
    encoder = minilm(runtime)
    t1 = time.perf_counter()
    encoder.warm_up()  # ONNX Runtime's session starts here (and exports the first time)
    ran = f"{encoder.runtime} int8" if encoder.int8 else encoder.runtime
    out = {"load": t1 - t0, "warm": time.perf_counter() - t1, "ran": ran,
           "times": {d: [] for d in args.depths}}
    reranker = qtsearch.Reranker(encoder, max(args.depths))
    with qtsearch.Index.open(index) as idx:
        first = {d: [idx.search(q, d) for q in QUERIES] for d in args.depths}
        for _ in range(args.repeats):
            for n, query in enumerate(QUERIES):
                for depth in args.depths:
                    t = time.perf_counter()
                    reranker([query], [first[depth][n]], 10)
                    out["times"][depth].append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--book", type=Path, default=BOOK)
    ap.add_argument("--work", type=Path, default=Path("/tmp/qt-bench-rerank"))
    ap.add_argument("--depths", type=int, nargs="+", default=[10, 30])
    ap.add_argument("--repeats", type=int, default=5, help="passes over the eight queries")
    ap.add_argument("--one-shot-runs", type=int, default=3)
    ap.add_argument("--runtimes", nargs="+", choices=BENCH_RUNTIMES, default=["auto"],
                    help="how MiniLM runs the re-ranker's encodings, each loaded and timed")
    ap.add_argument("--one-pass", action="store_true", help=argparse.SUPPRESS)  # a child
    args = ap.parse_args()

    import qtsearch

    index = args.work / "emma"
    if not (index / "manifest.json").is_file():
        qtsearch.Index.build(args.book, index, split_sentences=True).close()
    if args.one_pass:
        print(json.dumps(timed(args, args.runtimes[0], index)))
        return
    # Each pass over the queries runs one runtime in a process of its own, as a user's process
    # does (one runtime, one thread pool: two pools in one process contend for the cores), the
    # runtimes taking turns so that both see the same load.
    runs: dict[str, list[dict]] = {r: [] for r in args.runtimes}
    for _ in range(args.repeats):
        for runtime in args.runtimes:
            child = subprocess.run(
                [sys.executable, __file__, "--one-pass", "--repeats", "1", "--runtimes", runtime,
                 "--work", str(args.work), "--depths", *map(str, args.depths)],
                check=True, capture_output=True, text=True)
            runs[runtime].append(json.loads(child.stdout.strip().splitlines()[-1]))
    if len(args.runtimes) > 1:
        rerankers = {r: qtsearch.Reranker(minilm(r), max(args.depths))
                     for r in args.runtimes}
        with qtsearch.Index.open(index) as idx:
            compare(rerankers, {d: [idx.search(q, d) for q in QUERIES] for d in args.depths})

    one_shot = []
    for _ in range(args.one_shot_runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "qtsearch", "search", str(index), QUERIES[0],
                        "--rerank", "minilm", "-k", "10", "--json"], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        one_shot.append(time.perf_counter() - t)

    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end; "
          f"{len(QUERIES)} queries × {args.repeats}\n")
    print("| re-ranking | runtime | p50 ms | p90 ms |\n|---|---|---:|---:|")
    for depth in args.depths:
        for passes in runs.values():
            seconds = [t for run in passes for t in run["times"][str(depth)]]
            print(f"| depth {depth} | {passes[0]['ran']} | {quantiles(seconds)} |")
    print()
    for runtime, passes in runs.items():
        load = statistics.median(run["load"] for run in passes)
        warm = statistics.median(run["warm"] for run in passes)
        print(f"MiniLM ({runtime}: {passes[0]['ran']}) load {load:.1f} s, then warm-up "
              f"{warm:.2f} s (medians over {len(passes)} processes)")
    if one_shot:
        print(f"one-shot `qtsearch search --rerank minilm -k 10` median "
              f"{statistics.median(one_shot):.1f} s wall")


if __name__ == "__main__":
    main()
