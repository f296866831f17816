"""Batched exact search of a flat index on the GPU, against the GPU's own limits.

Opens the index with `Index.open(folder, device="cuda")` (the vectors go to the GPU in fp16),
then times its GPU backend's exact search (qtsearch.index.gpu) for batches of stored vectors
used as queries, and compares queries/s with the two ceilings of exact search: reading all
vectors once per batch at the measured device memory bandwidth, and the fp16 matmul peak
measured on the same GPU. Recall@k is against faiss-cpu exact search in fp32. Also the
end-to-end latency of one sentence query (encoding + search + metadata) through the Python API.

    python benchmarks/gpu_search.py /path/to/flat_index_folder
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def timed(fn, reps: int) -> float:
    """Median seconds of `fn()` after one warm-up, with the GPU synchronised."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def copy_bandwidth() -> float:
    """Device memory bytes/s of a 1 GiB copy, counting bytes read and written."""
    buf = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    return 2 * buf.numel() / timed(lambda: buf.clone(), 10)


def fp16_peak() -> float:
    """FLOP/s of an 8192³ fp16 matmul."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    return 2 * 8192**3 / timed(lambda: a @ a, 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path, help="a flat index folder (qtsearch build-index)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 256, 4096])
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_search: needs a CUDA GPU")

    from qtsearch import Index
    from qtsearch.index.gpu import GpuFlatBackend
    from qtsearch.index.recall import recall_at_k

    t = time.perf_counter()
    index = Index.open(args.index, device="cuda")
    open_s = time.perf_counter() - t
    if not isinstance(index.backend, GpuFlatBackend):
        raise SystemExit(f"gpu_search: {args.index} is a {index.info()['index_type']} index, "
                         "not flat")
    gpu, cpu = index.backend.flat, index.backend.base
    n, d = gpu.ntotal, gpu.dim
    rng = np.random.default_rng(0)
    pool = cpu.reconstruct(rng.choice(n, max(args.batches), replace=False))

    bandwidth, peak = copy_bandwidth(), fp16_peak()
    scan_bytes = n * d * 2

    _, truth = cpu.search(pool[:200], args.k)
    _, found = gpu.search(pool[:200], args.k)
    recall = recall_at_k(found, truth)

    print(f"GPU: {torch.cuda.get_device_name()}; index {args.index} ({n:,} x {d}, fp16 on GPU, "
          f"{scan_bytes / 1e9:.2f} GB); opened in {open_s:.1f} s; memory bandwidth "
          f"{bandwidth / 1e12:.2f} TB/s; fp16 matmul {peak / 1e12:.0f} TFLOP/s; recall@{args.k} "
          f"vs faiss-cpu fp32 exact: {recall:.3f}")
    print()
    print("| batch | median ms | queries/s | bandwidth limit q/s | compute limit q/s | "
          "% of the binding limit |")
    print("|---:|---:|---:|---:|---:|---:|")
    for b in args.batches:
        q = pool[:b]
        sec = timed(lambda q=q: gpu.search(q, args.k), args.reps)
        bw_limit = b * bandwidth / scan_bytes
        flop_limit = peak / (2 * n * d)
        bound = min(bw_limit, flop_limit)
        print(f"| {b:,} | {sec * 1e3:.2f} | {b / sec:,.0f} | {bw_limit:,.0f} | "
              f"{flop_limit:,.0f} | {100 * (b / sec) / bound:.0f}% |", flush=True)

    sentences = [r.text for r in index.get(rng.choice(n, 50, replace=False).tolist())]
    lat = []
    for s in sentences:
        t = time.perf_counter()
        index.search(s, args.k)
        lat.append(time.perf_counter() - t)
    print(f"\nOne sentence end to end (encoding where the model runs, GPU search, metadata), "
          f"{len(lat)} queries: "
          f"p50 {1e3 * statistics.median(lat):.1f} ms, "
          f"p95 {1e3 * float(np.percentile(lat, 95)):.1f} ms")
    index.close()


if __name__ == "__main__":
    main()
