"""Benchmark `build-index --engine ray` against `--engine local` on the same Wikipedia shards.

Each build runs `qtsearch build-index` in a child process; the runs alternate engines (local,
ray, local, ray, …) so that both see the same phases of a shared machine, and the median of
`--repeats` runs is printed. Memory is the peak of the proportional set size (PSS: shared pages
split between the processes that share them) summed over the child and all its descendants,
sampled every 0.2 s: with Ray that is the driver, Ray's own services (GCS, raylet, dashboard
agent) and the workers, which the child's own peak RSS would leave out. Every Ray index is
checked byte for byte against the local one.

    python benchmarks/ray_build.py --wikipedia 10 --workers 2 --repeats 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from build_index import REPO, wikipedia_shards

ENGINES = ("local", "ray")


def tree_pss(root: int) -> int:
    """Bytes of PSS of `root` and every process below it (0 for those gone meanwhile)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, parent in parents.items() if parent == pid and p not in tree]
        tree.update(kids)
        frontier += kids
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
                total += next(int(line.split()[1]) * 1024 for line in fh
                              if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total


def build(engine: str, corpus: list[Path], out: Path, args: argparse.Namespace
          ) -> tuple[float, int]:
    """(wall seconds, peak PSS of the process tree) of one build in a child process."""
    cmd = [sys.executable, str(REPO / "cli.py"), "build-index", *map(str, corpus), "--out",
           str(out), "--index", args.index, "--device", "cpu", "-q", "--engine", engine]
    if engine == "ray" and args.workers:
        cmd += ["--workers", str(args.workers)]
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], tree_pss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - t
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit(f"benchmark: {engine} build failed ({proc.returncode}): {stderr[-2000:]}")
    return wall, peak[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wikipedia", type=int, default=10, metavar="K",
                    help="the first K of the 200 Wikipedia shards")
    ap.add_argument("--workers", type=int, default=None, help="Ray workers (default: per CPU)")
    ap.add_argument("--index", default="auto", help="auto | flat | sq8 | ivf-pq | hnsw")
    ap.add_argument("--repeats", type=int, default=1, help="runs per engine, alternating")
    ap.add_argument("--workdir", default=None, help="where the indexes go (a temp dir)")
    args = ap.parse_args()

    from qtsearch.lifecycle.on_disk import read_manifest

    work = Path(args.workdir or tempfile.mkdtemp(prefix="qtsearch-ray-bench-"))
    corpus = wikipedia_shards(args.wikipedia)
    runs: dict[str, list[dict]] = {e: [] for e in ENGINES}
    try:
        for r in range(args.repeats):
            for engine in ENGINES:
                out = work / f"{engine}-{r}"
                wall, pss = build(engine, corpus, out, args)
                m = read_manifest(out)
                runs[engine].append({"wall": wall, "pss": pss, "count": m["count"],
                                     "key": m["index_key"], **m["stages"],
                                     "faiss": (out / "index.faiss").read_bytes()})
                print(f"{engine:>5} run {r + 1}: {m['count']:,} sentences, wall {wall:.1f} s, "
                      f"stages {m['stages']}, peak PSS {pss / 1e9:.2f} GB", flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    same = all(x["faiss"] == runs["local"][0]["faiss"] for x in runs["ray"])
    n = runs["local"][0]["count"]
    print(f"\n{n:,} sentences of {args.wikipedia} Wikipedia shards, {runs['local'][0]['key']}; "
          f"{os.cpu_count()} CPUs; medians of {args.repeats} alternating runs; Ray index "
          f"byte-identical to the local one: {'yes' if same else 'NO'}\n")
    print("| engine | read s | embed s | index s | metadata s | wall s | sentences/s (wall) "
          "| peak PSS (process tree) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for engine in ENGINES:
        med = {k: statistics.median(x[k] for x in runs[engine])
               for k in ("read", "embed", "index", "metadata", "wall", "pss")}
        label = engine if engine == "local" else f"ray ({args.workers or 'one per CPU'} workers)"
        print(f"| {label} | {med['read']:.1f} | {med['embed']:.1f} | {med['index']:.1f} | "
              f"{med['metadata']:.1f} | {med['wall']:.1f} | {n / med['wall']:,.0f} | "
              f"{med['pss'] / 1e9:.2f} GB |")


if __name__ == "__main__":
    main()
