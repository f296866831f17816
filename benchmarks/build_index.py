"""Benchmark `qtsearch build-index` on N sentences of the shared Gutenberg books, or on Wikipedia.

For each N (default 10k, 100k, 1M) the first N sentences of the books (running text, split into
sentences, in file order) are written one per line, and `qtsearch build-index` runs on them in
a child process, so its peak RSS is measured alone (os.wait4). With `--wikipedia K …` the
corpus is instead the first K of the 200 WikiExtractor shards of ../shared/data/wikipedia as
they are (all 200: the folder itself, ~1.44M sentences, i.e. `qtsearch build-index
../shared/data/wikipedia`); the sentence count is then what the build read. Printed per N:
time per stage, sentences/s, peak RSS, size on disk, peak RSS minus index size (the target: at
most 2 GB at every N, i.e. memory flat in corpus size), and the embedding stage's arithmetic
throughput against a dense matmul of the same precision on the same device (the target: ≥ 60%): the
model's GRU arithmetic per second, and the share of it actually executed (the CPU batch path
looks input projections up per word instead of multiplying them out).

    python benchmarks/build_index.py --model DIR --sentences 10000 100000 1000000

The last lines are a Markdown table ready for the README. Use --json FILE to keep raw figures.

Chained with the query benchmark, the 1M sentences are embedded once (embedding is ~85% of
the cost): build flat indexes and keep the largest, then derive the other index types from it.
With the shipped 1200-d model on 2 cores, expect ~8 min for this step (writing the corpus,
embedding 1.11M sentences ~3 min per million, flat add ~30 s, metadata ~5 s at 1M) and
~10-12 min for query_latency.py (sq8/ivf-pq/hnsw derived from the kept vectors, HNSW being
the slow one):

    python benchmarks/build_index.py --index flat --sentences 10000 100000 1000000 \
        --keep /tmp/qt-bench/flat_1000000 --json /tmp/qt-bench/build.json
    python benchmarks/query_latency.py --from-index /tmp/qt-bench/flat_1000000 \
        --work /tmp/qt-bench --out /tmp/qt-bench/query.json

Wikipedia end to end (the default index choice, IVF-PQ at this size):

    python benchmarks/build_index.py --wikipedia 200 --json /tmp/qt-bench/wiki.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
GUTENBERG = REPO.parent / "shared" / "data" / "gutenberg"
WIKIPEDIA = REPO.parent / "shared" / "data" / "wikipedia"


def wikipedia_shards(k: int | None = None) -> list[Path]:
    """The first k (default: all) WikiExtractor shards of the shared Wikipedia folder, in the
    order build-index reads a folder."""
    from qtsearch.text.reader import list_files

    shards = list_files([WIKIPEDIA]) if WIKIPEDIA.is_dir() else []
    k = len(shards) if k is None else k
    if not 0 < k <= len(shards):
        sys.exit(f"benchmark: {k} Wikipedia shards asked, {WIKIPEDIA} holds {len(shards)}")
    return shards[:k]


def write_corpus(n: int, path: Path) -> int:
    """The first n sentences of the Gutenberg books, one per line, a blank line between books."""
    from qtsearch.text.reader import read_sentences

    books = sorted(GUTENBERG.glob("*.txt.gz"))
    if not books:
        sys.exit(f"benchmark: no Gutenberg books in {GUTENBERG}")
    written, doc = 0, None
    with open(path, "w", encoding="utf-8") as fh:
        for s in read_sentences([str(b) for b in books], split=True):
            if doc is not None and s.doc != doc:
                fh.write("\n")
            doc = s.doc
            fh.write(s.text.replace("\n", " ") + "\n")
            written += 1
            if written == n:
                break
    return written


def gru_flops_per_token(model, prefix: str = "weight_") -> int:
    """Multiply-adds x 2 of every GRU weight matrix named `prefix`..., applied once per token
    per GRU: "weight_" counts all (the model's arithmetic), "weight_hh" the recurrent ones."""
    import torch

    total = 0
    for module in model.modules():
        if isinstance(module, torch.nn.GRU):
            total += sum(p.numel() for name, p in module.named_parameters()
                         if name.startswith(prefix))
    return 2 * total


def matmul_gflops(device: str, dtype_name: str, reps: int = 20) -> float:
    """Dense square matmul throughput in the precision the embedding uses (2048² saturates the
    CPU; a GPU needs 8192² to reach its peak)."""
    import torch

    size = 8192 if device == "cuda" else 2048

    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype_name]
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    if device == "cuda":
        torch.cuda.synchronize()
    return 2 * size**3 * reps / (time.perf_counter() - t) / 1e9


def model_figures(model_path: str | None, device: str, precision: str,
                  sample: list[str]) -> dict:
    """FLOPs per token, mean tokens per sentence (on a sample) and the matmul ceiling."""
    import torch

    from qtsearch.encoders.mean import MeanEncoder
    from qtsearch.encoders.registry import load_encoder

    enc = load_encoder(model_path, device=device, precision=precision)
    tokens = sum(len(enc.token_ids(s)) for s in sample) / max(1, len(sample))
    figures = {"model": str(enc.path), "dim": enc.dim, "tokens_per_sentence": tokens,
               "threads": torch.get_num_threads()}
    if isinstance(enc, MeanEncoder):  # a mean of words encoded in numpy: no GRUs
        return figures | {"device": "cpu", "precision": "fp32", "flops_per_token": 0,
                          "executed_flops_per_token": 0,
                          "matmul_gflops": matmul_gflops("cpu", "fp32")}
    precision = "bf16" if enc.amp == torch.bfloat16 else "fp32"
    return figures | {
        "device": str(enc.device), "precision": precision,
        "flops_per_token": gru_flops_per_token(enc.model),
        # the CPU batch path looks the input projections up per word: only the recurrent
        # matmuls are executed per token (qtsearch/encoders/fast/stepped.py)
        "executed_flops_per_token": gru_flops_per_token(
            enc.model, "weight_hh" if enc._large_batches is not None else "weight_"),
        "matmul_gflops": matmul_gflops(enc.device.type, precision)}


def run_build(corpus: list[Path], out: Path, args: argparse.Namespace
              ) -> tuple[float, int, str, float]:
    """Run the CLI in a child; returns (wall seconds, peak RSS bytes, stderr tail, CPU seconds
    of all its threads: what the build costs whatever else loads the machine)."""
    cmd = [sys.executable, str(REPO / "cli.py"), "build-index", *map(str, corpus),
           "--out", str(out),
           "--index", args.index, "--device", args.device, "--precision", args.precision,
           "--batch-size", str(args.batch_size), "--fit", args.fit, "-q"]
    if args.model:
        cmd += ["--model", args.model]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"benchmark: build-index failed ({proc.returncode}): {stderr.strip()[-2000:]}")
    return wall, usage.ru_maxrss * 1024, stderr, usage.ru_utime + usage.ru_stime


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    ap.add_argument("--index", default="auto", help="auto | flat | sq8 | ivf-pq | hnsw")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--precision", default="auto", help="auto | fp32 | bf16 (embedding)")
    ap.add_argument("--batch-size", type=int, default=512, help="sentences per embedding batch")
    ap.add_argument("--fit", default="auto", help="build-index --fit (vectors fitted to the "
                    "corpus; auto: whiten:768 under 300k sentences, centre from there on)")
    ap.add_argument("--workdir", default=None, help="where corpora and indexes go (temp dir)")
    ap.add_argument("--json", default=None, help="also write the raw figures here")
    ap.add_argument("--corpus", default=None, type=Path,
                    help="use this corpus (one sentence a line) instead of writing one from "
                         "the books; --sentences is then its line count")
    ap.add_argument("--wikipedia", type=int, nargs="+", default=None, metavar="K",
                    help="build on the first K of the 200 Wikipedia shards instead (200: the "
                         "whole folder, ~1.44M sentences); --sentences is then ignored")
    ap.add_argument("--keep", default=None, type=Path,
                    help="keep the index of the largest N here (needs --index flat: "
                         "query_latency.py --from-index derives the other types from it)")
    args = ap.parse_args()
    if args.corpus:
        if not args.corpus.is_file():
            ap.error(f"--corpus {args.corpus}: no such file")
        with open(args.corpus, encoding="utf-8") as fh:
            args.sentences = [sum(1 for line in fh if line.strip())]
    if args.keep and args.index != "flat":
        ap.error("--keep needs --index flat (only a flat index holds the exact vectors)")
    if args.keep and args.keep.exists():
        ap.error(f"--keep {args.keep}: already exists; remove it or choose another folder")

    from qtsearch.core.errors import QTSearchError
    from qtsearch.lifecycle.on_disk import build_seconds, folder_bytes, read_manifest
    from qtsearch.text.reader import read_sentences

    work = Path(args.workdir or tempfile.mkdtemp(prefix="qtsearch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    figures: dict | None = None
    runs = sorted(args.wikipedia or args.sentences)
    try:
        for n in runs:
            if args.wikipedia:  # all of them: the folder, as a user would name it
                corpus = [WIKIPEDIA] if n == len(wikipedia_shards()) else wikipedia_shards(n)
            else:
                corpus = [args.corpus or work / f"gutenberg-{n}.txt"]
                if not args.corpus:
                    write_corpus(n, corpus[0])
            if figures is None:
                sample = [s.text for s in itertools.islice(
                    read_sentences([str(p) for p in corpus]), 20_000)]
                try:
                    figures = model_figures(args.model, args.device, args.precision, sample)
                except QTSearchError as e:
                    sys.exit(f"benchmark: {e}")
            out = work / f"index-{n}"
            shutil.rmtree(out, ignore_errors=True)
            wall, rss, _, cpu = run_build(corpus, out, args)
            m = read_manifest(out)
            got = m["count"]
            st = m["stages"]
            index_bytes = (out / "index.faiss").stat().st_size
            embed_gflops = (got * figures["tokens_per_sentence"] * figures["flops_per_token"]
                            / max(st["embed"], 1e-9) / 1e9)
            row = {"sentences": got, "wall_s": wall, "cpu_s": cpu,
                   "load": os.getloadavg()[0],
                   "corpus": f"wikipedia:{n} shards" if args.wikipedia else "gutenberg",
                   **{f"{k}_s": v for k, v in st.items()},
                   "total_s": build_seconds(m),
                   "index_type": m["index_type"],
                   "index_key": m["index_key"], "peak_rss": rss, "index_bytes": index_bytes,
                   "disk_bytes": folder_bytes(out), "rss_over_index": rss - index_bytes,
                   "embed_gflops": embed_gflops,
                   "embed_share_of_matmul": embed_gflops / figures["matmul_gflops"],
                   # a model without GRUs (the mean of words) has no matmul to compare
                   "executed_share_of_matmul": embed_gflops / figures["matmul_gflops"]
                   * figures["executed_flops_per_token"] / max(figures["flops_per_token"], 1),
                   "recall": m.get("build", {}).get("recall", {})}
            row["sentences_per_s"] = got / row["total_s"]
            results.append(row)
            print(f"{got:>9,} sentences: read {st['read']:.1f} s, embed {st['embed']:.1f} s, "
                  f"index {st['index']:.1f} s, metadata {st['metadata']:.1f} s "
                  f"(wall {wall:.1f} s incl. start-up, {row['cpu_s']:.0f} CPU-s) | "
                  f"{row['sentences_per_s']:,.0f} "
                  f"sentences/s | peak RSS {gb(rss)} | on disk {gb(row['disk_bytes'])} | "
                  f"{m['index_key']} {m['index_params']} recall@10 "
                  f"{row['recall'].get('recall@10', 1.0)} | load {os.getloadavg()[0]:.1f}",
                  flush=True)
            if not (args.corpus or args.wikipedia):
                corpus[0].unlink()
        if args.keep:
            args.keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(work / f"index-{runs[-1]}", args.keep)
            print(f"kept the {results[-1]['sentences']:,}-sentence index in {args.keep}",
                  flush=True)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    f = figures or {}
    print()
    print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"torch threads {f.get('threads')}; model {f.get('model')} (dim {f.get('dim')}, "
          f"{f.get('device')}, {f.get('precision')}); dense {f.get('precision')} matmul "
          f"{f.get('matmul_gflops', 0):,.0f} GFLOP/s; {f.get('tokens_per_sentence', 0):.1f} "
          f"tokens/sentence, {f.get('flops_per_token', 0) / 1e6:.2f} MFLOP/token in the model's "
          f"GRUs, {f.get('executed_flops_per_token', 0) / 1e6:.2f} of them executed.")
    print()
    if results and results[0]["total_s"] < sum(results[0][f"{k}_s"] for k in
                                               ("read", "embed", "index", "metadata")) - 1e-6:
        print("Index and metadata ran side by side: total = read + embed + max(index, "
              "metadata).")
        print()
    print("| sentences | read s | embed s | index s | metadata s | total s | sentences/s "
          "| index | peak RSS | RSS − index | on disk | embed GFLOP/s (% of matmul) "
          "| executed (% of matmul) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['sentences']:,} | {r['read_s']:.1f} | {r['embed_s']:.1f} | "
              f"{r['index_s']:.1f} | {r['metadata_s']:.1f} | {r['total_s']:.1f} | "
              f"{r['sentences_per_s']:,.0f} | {r['index_key']} | {gb(r['peak_rss'])} | "
              f"{gb(r['rss_over_index'])} | {gb(r['disk_bytes'])} | "
              f"{r['embed_gflops']:,.0f} ({100 * r['embed_share_of_matmul']:.0f}%) | "
              f"{100 * r['executed_share_of_matmul']:.0f}% |")
    for n in sorted({r["sentences"] for r in results}):
        same = [r for r in results if r["sentences"] == n]
        if len(same) > 1:  # repeated sizes (--sentences N N N): the median of each figure
            med = {k: float(np.median([r[k] for r in same]))
                   for k in ("read_s", "embed_s", "index_s", "metadata_s", "total_s", "wall_s",
                             "peak_rss", "cpu_s")}
            print(f"\nmedian of {len(same)} at {n:,} sentences: read {med['read_s']:.1f} s, "
                  f"embed {med['embed_s']:.1f} s, index {med['index_s']:.1f} s, metadata "
                  f"{med['metadata_s']:.1f} s, total {med['total_s']:.1f} s, wall "
                  f"{med['wall_s']:.1f} s incl. start-up, {med['cpu_s']:.0f} CPU-s "
                  f"({n / med['total_s']:,.0f} "
                  f"sentences/s), peak RSS {gb(med['peak_rss'])}; load average "
                  f"{os.getloadavg()[0]:.1f} at the end")
    if len(results) > 1 and results[0]["sentences"] != results[-1]["sentences"]:
        a, b = results[0], results[-1]
        scale = b["sentences"] / a["sentences"]
        print(f"\n{scale:,.0f}x the sentences: total time x"
              f"{(b['total_s'] / a['total_s']):.1f}, time per sentence x"
              f"{(a['sentences_per_s'] / b['sentences_per_s']):.2f}; RSS − index "
              f"{gb(a['rss_over_index'])} → {gb(b['rss_over_index'])}.")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": f, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
