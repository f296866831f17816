"""Index candidates side by side on the same vectors: build, tuning and query cost at a recall
target.

The vectors are those of a flat index (`build_index.py --index flat --keep DIR`: the corpus
embedded once, after the build's fitted transform), so every candidate indexes the very floats
`build-index` would hand its index stage, and nothing is embedded again. For each candidate:

- build: train (k-means on a fixed-seed sample, for inverted files) and add, wall seconds;
- tune: what the builder's own tuning costs (`qtsearch.index.recall`: exact neighbours of
  corpus queries, then the smallest search parameter reaching recall@10 ≥ the target);
- recall@10 of held-out queries (sentences after the first N) against exact search, tie-aware
  as the builder counts it;
- single-query search p50 / p95 (one thread per query, as the query layer runs a lone query);
- index memory.

    nice -n 10 python benchmarks/index_candidates.py --from-index /tmp/qt-speed/flat_1000000 \
        --candidates ivf1024-flat ivf1024-sq8 hnsw32 usearch16 --out /tmp/qt-speed/cand.json

Candidates are named `ivf{nlist}-{flat|sq8|sq8r|fp16|pq|fs}` (sq8r: 8-bit codes re-ranked
with the fp32 vectors; fs: 4-bit fast-scan PQ re-ranked likewise), `hnsw{M}[-ef{efConstruction}]`,
`usearch{M}[-i8|-f16]`. Vectors are cached as .npy beside --cache (the flat index's file read
once).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

if TYPE_CHECKING:  # the index modules (faiss) load where they are used, as elsewhere here
    from qtsearch.index.recall import Truth


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_vectors(flat: Path, cache: Path | None) -> np.ndarray:
    from qtsearch.index.faiss_backend import flat_vectors, open_faiss_index

    if cache is not None and cache.is_file():
        return np.load(cache, mmap_mode="r")
    index = open_faiss_index(flat / "index.faiss", mmap=True)
    x = np.array(flat_vectors(index))  # a view into `index`: copied while it is alive
    if cache is not None:
        np.save(cache, x)
    return x


def held_out_vectors(flat: Path, n_queries: int) -> np.ndarray:
    """Held-out sentences embedded as a query is (the index's model and transform)."""
    from query_latency import queries_after

    from qtsearch import Index

    texts = queries_after(flat, n_queries)
    with Index.open(flat, device="cpu") as idx:
        texts = [q for q in texts if idx.encoder.known_words(q) > 0]
        return np.ascontiguousarray(idx.embed(texts), dtype=np.float32)


def tuning_queries(x: np.ndarray) -> tuple[np.ndarray, Truth]:
    """500 rows of the index as the queries the search parameters are tuned on (the same for
    every candidate) and their exact 10 nearest rows."""
    from qtsearch.index.recall import exact_neighbours

    rng = np.random.default_rng(1)
    queries = np.ascontiguousarray(x[np.sort(rng.choice(len(x), 500, replace=False))])
    truth = exact_neighbours(queries, (x[lo:lo + 200_000] for lo in
                                       range(0, len(x), 200_000)), 10)
    return queries, truth


class Faiss:
    """A faiss factory key built as the builder builds it (qtsearch.index.faiss_backend)."""

    def __init__(self, name: str, key: str, tune: str | None, candidates: list[int],
                 ef_construction: int | None = None, train: int = 0,
                 outer: str | None = None, outer_candidates: list[int] | None = None):
        self.name, self.key, self.tune, self.candidates = name, key, tune, candidates
        self.outer, self.outer_candidates = outer, outer_candidates
        self.ef_construction, self.train_size = ef_construction, train

    def build(self, x: np.ndarray) -> dict[str, float]:
        import faiss

        from qtsearch.index.faiss_backend import FaissBuilder

        t = time.perf_counter()
        b = FaissBuilder(self.key, x.shape[1])
        if self.ef_construction:
            faiss.downcast_index(b.index).hnsw.efConstruction = self.ef_construction
        if b.needs_training:
            rows = np.random.default_rng(0).choice(len(x), min(len(x), self.train_size),
                                                   replace=False)
            b.train(np.ascontiguousarray(x[np.sort(rows)]))
        train_s = time.perf_counter() - t
        b.reserve(len(x))
        for lo in range(0, len(x), 100_000):
            b.add(np.ascontiguousarray(x[lo:lo + 100_000]))
        self.builder = b
        return {"train_s": train_s, "build_s": time.perf_counter() - t}

    def tune_and_measure(self, x: np.ndarray, target: float) -> tuple[dict[str, Any], float,
                                                                        float]:
        from qtsearch.index.recall import tune_search

        t = time.perf_counter()
        queries, truth = tuning_queries(x)
        params, recall = ({}, 1.0) if not self.tune else tune_search(
            self.builder.index, self.tune, self.candidates, queries, truth, target,
            self.outer, self.outer_candidates, fold=self.builder.fold)
        return params, recall, time.perf_counter() - t

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        from qtsearch.index.faiss_backend import search_rows

        return search_rows(self.builder.index, self.builder.fold, q, k)[1]

    def set(self, params: dict[str, Any]) -> None:
        from qtsearch.index.faiss_backend import apply_search_params

        apply_search_params(self.builder.index, params)

    def nbytes(self, path: Path) -> int:
        import faiss

        faiss.write_index(self.builder.index, str(path))
        n = path.stat().st_size
        path.unlink()
        return n


class USearch:
    """usearch's HNSW (inner product), connectivity M, its default expansions otherwise."""

    def __init__(self, name: str, m: int, dtype: str):
        self.name, self.m, self.dtype, self.tune = name, m, dtype, "expansion_search"
        self.candidates = [16, 32, 64, 128, 256, 512, 1024]

    def build(self, x: np.ndarray) -> dict[str, float]:
        from usearch.index import Index

        t = time.perf_counter()
        self.index = Index(ndim=x.shape[1], metric="ip", dtype=self.dtype, connectivity=self.m)
        self.index.add(np.arange(len(x)), np.ascontiguousarray(x), threads=os.cpu_count() or 1)
        return {"train_s": 0.0, "build_s": time.perf_counter() - t}

    def set(self, params: dict[str, Any]) -> None:
        for name, value in params.items():
            setattr(self.index, name, int(value))

    def search(self, q: np.ndarray, k: int) -> np.ndarray:
        keys = self.index.search(q, k, threads=1).keys
        return np.asarray(keys, dtype=np.int64).reshape(len(q), k)

    def tune_and_measure(self, x: np.ndarray, target: float) -> tuple[dict[str, Any], float,
                                                                        float]:
        from qtsearch.index.recall import recall_at_k

        t = time.perf_counter()
        queries, truth = tuning_queries(x)
        best: tuple[dict[str, Any], float] = ({}, -1.0)
        for value in self.candidates:  # smallest first: the cost is that of the last one
            self.set({self.tune: value})
            r = recall_at_k(self.index.search(queries, 10).keys.astype(np.int64), truth)
            best = ({self.tune: value}, r)
            if r >= target:
                break
        return best[0], best[1], time.perf_counter() - t

    def nbytes(self, path: Path) -> int:
        self.index.save(str(path))
        n = path.stat().st_size
        path.unlink()
        return n


def candidate(name: str, n: int, dim: int) -> Faiss | USearch:
    from qtsearch.index.choose import pq_m

    if m := re.fullmatch(r"ivf(\d+)-(flat|sq8|sq8r|fp16|pq|fs)", name):
        nlist, codes = int(m[1]), m[2]
        key = {"flat": f"IVF{nlist},Flat", "sq8": f"IVF{nlist},SQ8",
               "fp16": f"IVF{nlist},SQfp16", "sq8r": f"IVF{nlist},SQ8,RFlat",
               "pq": f"IVF{nlist},PQ{pq_m(dim)}x8,Refine(SQfp16)",
               "fs": f"IVF{nlist},PQ{dim // 4}x4fs,RFlat"}[codes]
        probes = [p for p in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
                  if p <= nlist]
        refine = codes in ("pq", "fs", "sq8r")
        return Faiss(name, key, "nprobe", probes, train=min(n, max(nlist * 40, 10_000)),
                     outer="k_factor_rf" if refine else None,
                     # re-ranking 10·k exact vectors costs little beside the scan: sq8r
                     # re-ranks a fixed shortlist and tunes nprobe alone
                     outer_candidates=([16] if codes == "sq8r" else [2, 4, 8, 16, 32])
                     if refine else None)
    if m := re.fullmatch(r"hnsw(\d+)(?:-ef(\d+))?", name):
        return Faiss(name, f"HNSW{m[1]}", "efSearch", [16, 32, 64, 128, 256, 512, 1024],
                     ef_construction=int(m[2]) if m[2] else None)
    if m := re.fullmatch(r"usearch(\d+)(?:-(i8|f16|f32))?", name):
        return USearch(name, int(m[1]), m[2] or "f32")
    sys.exit(f"index_candidates: unknown candidate {name!r}")


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.asarray(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 95))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from-index", type=Path, required=True, help="a flat index folder")
    ap.add_argument("--cache", type=Path, default=None, help=".npy cache of its vectors")
    ap.add_argument("--candidates", nargs="+", required=True)
    ap.add_argument("--rows", type=int, default=None, help="the first N vectors only")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--held-out-rows", action="store_true",
                    help="queries: --queries rows of the flat index's second half, left out of "
                         "the candidates (else sentences after the corpus, embedded here)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import faiss

    from qtsearch.index.recall import TIE_EXTRA, Truth, recall_at_k

    x = load_vectors(args.from_index, args.cache)
    if args.rows:
        x = x[:args.rows]
    x = np.ascontiguousarray(x, dtype=np.float32)
    if args.held_out_rows:
        # Corpus rows taken out of the index: real sentences it does not hold, needing no
        # encoder (one that no longer matches the flat index's model cannot embed queries).
        rows = np.zeros(len(x), dtype=bool)
        rows[np.linspace(len(x) // 2, len(x) - 1, args.queries).astype(np.int64)] = True
        q, x = np.ascontiguousarray(x[rows]), np.ascontiguousarray(x[~rows])
    else:
        q = held_out_vectors(args.from_index, args.queries)
    exact = faiss.IndexFlatIP(x.shape[1])
    exact.add(x)
    scores, ids = exact.search(q, 10 + TIE_EXTRA)
    truth = Truth(ids, scores, 10)
    del exact
    load = os.getloadavg()
    log(f"{len(x):,} vectors x {x.shape[1]}; {len(q)} held-out queries; load {load[0]:.2f}")
    rows = []
    for name in args.candidates:
        c = candidate(name, len(x), x.shape[1])
        log(f"{name}: building")
        cpu = time.process_time()  # CPU seconds of all threads: robust to a loaded machine
        cost = c.build(x)
        cost["build_cpu_s"] = time.process_time() - cpu
        params, tune_recall, tune_s = c.tune_and_measure(x, args.target)
        c.set(params)
        found = c.search(q, 10)
        recall = recall_at_k(found, truth, getattr(getattr(c, "builder", None), "fold", None))
        times, cpu_times = [], []
        for v in q[:300]:
            # a lone query runs on this thread alone (faiss: one OpenMP thread; usearch:
            # threads=1), so this thread's CPU time is its cost whatever else loads the machine
            t, c0 = time.perf_counter(), time.thread_time()
            c.search(v[None, :], 10)
            times.append(time.perf_counter() - t)
            cpu_times.append(time.thread_time() - c0)
        p50, p95 = percentiles(times)
        cpu50, _ = percentiles(cpu_times)
        row = {"candidate": name, "key": getattr(c, "key", f"usearch M={getattr(c, 'm', '')} "
                                                         f"{getattr(c, 'dtype', '')}"),
               **{k: round(v, 2) for k, v in cost.items()}, "tune_s": round(tune_s, 2),
               "params": params, "tune_recall": round(tune_recall, 4),
               "recall@10": round(recall, 4), "p50_ms": round(p50, 3),
               "cpu_p50_ms": round(cpu50, 3),
               "p95_ms": round(p95, 3),
               "bytes": c.nbytes(Path("/tmp") / f"cand-{os.getpid()}.idx"),
               "load": round(os.getloadavg()[0], 2)}
        log(json.dumps(row))
        rows.append(row)
        del c
    print(f"\n{len(x):,} vectors x {x.shape[1]} ({args.from_index}); {len(q)} held-out "
          f"queries; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"faiss {faiss.__version__}; load average at start {load[0]:.2f}\n")
    print("| candidate | key | train s | build s (incl. train) | build CPU s | tune s | params "
          "| recall@10 held-out | search p50 / p95 ms | search CPU p50 ms | size MB | load |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in r["params"].items()) or "–"
        print(f"| {r['candidate']} | `{r['key']}` | {r['train_s']:.1f} | {r['build_s']:.1f} | "
              f"{r['build_cpu_s']:.1f} | {r['tune_s']:.1f} | {params} | {r['recall@10']:.3f} | "
              f"{r['p50_ms']:.2f} / {r['p95_ms']:.2f} | {r.get('cpu_p50_ms', 0):.2f} | "
              f"{r['bytes'] / 1e6:,.0f} | "
              f"{r['load']:.1f} |")
    if args.out:
        args.out.write_text(json.dumps({"vectors": len(x), "dim": int(x.shape[1]),
                                        "queries": len(q), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
