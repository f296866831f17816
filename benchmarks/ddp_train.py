"""Training sentences/s on one process against several (gloo on the CPU, NCCL on GPUs), at the
same global batch.

Each row runs `qtsearch train` on real text (the shared Gutenberg books) for --steps optimiser
steps of G = 2 batches each (--batches-per-step 2 on one process; --nproc 2 shares them): the
runs compute the same steps, so the only difference is how. The rate is the steady one between
the two logged windows (steps 21–N), read back from metrics.jsonl; tokenising, start-up and the
first 20 steps are left out. Run on an otherwise idle machine.

    python benchmarks/ddp_train.py                      # QT uni H=300 and bow, 40 steps of 2 × 64
    python benchmarks/ddp_train.py --steps 60 --device cuda --nproc 2
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from qtsearch.text.reader import read_sentences

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg"
BOOKS = ["0003-austen-jane--emma.txt.gz", "0728-dickens-charles--a-tale-of-two-cities.txt.gz"]
MODELS = {  # name: train options
    "QT uni H=300": ["--encoder", "uni", "--hidden", "300", "--word-dim", "300"],
    "QT bow W=300": ["--encoder", "bow", "--hidden", "1", "--word-dim", "300"],
}


def corpus(folder: Path, n: int) -> Path:
    """The first `n` sentences of the books, one a line (tokenising stays out of the timing)."""
    path = folder / "corpus.txt"
    sentences = read_sentences([DATA / b for b in BOOKS], split=True)
    path.write_text("\n".join(" ".join(s.text.split()) for s in itertools.islice(sentences, n))
                    + "\n", encoding="utf-8")
    return path


def run(text: Path, out: Path, options: list[str], nproc: int, threads: int, steps: int,
        batch_size: int, device: str) -> float:
    argv = [sys.executable, "-m", "qtsearch", "train", str(text), "--out", str(out),
            "--vocab-size", "20000", "--batch-size", str(batch_size), "--max-steps", str(steps),
            "--val-every", str(steps), "--checkpoint-every", str(steps), "--batches-per-step",
            "2", "--device", device, "--precision", "fp32", "-q", *options]
    if nproc > 1:
        argv += ["--nproc", str(nproc)]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return steady_rate(out)


def steady_rate(folder: Path) -> float:
    """Sentences/s between the last two log rows. A row's rate is sentences / seconds since
    the first step, with n·S sentences after step n, so row n was written n·S/rate seconds in:
    (b − a)·S sentences in S·(b/rate_b − a/rate_a) seconds between rows a and b."""
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    (a, ra), (b, rb) = [(r["step"], r["sentences_per_s"]) for r in rows
                        if "sentences_per_s" in r][-2:]
    return (b - a) / (b / rb - a / ra)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="optimiser steps (log every 20)")
    ap.add_argument("--sentences", type=int, default=10_000)
    ap.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    table = Table(title=f"training, global batch 2 × {args.batch_size} sentences, "
                        f"{args.device}, {cores} cores")
    for col in ("model", "processes", "threads each", "sentences/s", f"vs 1 × {cores} threads"):
        table.add_column(col, justify="left" if col == "model" else "right")
    layouts = [(1, cores), (1, 1), (args.nproc, max(1, cores // args.nproc))]
    load = os.getloadavg()[0]  # other work on the machine skews every figure
    with tempfile.TemporaryDirectory() as tmp:
        text = corpus(Path(tmp), args.sentences)
        for name, options in MODELS.items():
            base = None
            for i, (nproc, threads) in enumerate(layouts):
                rate = run(text, Path(tmp) / f"m{i}", options, nproc, threads, args.steps,
                           args.batch_size, args.device)
                base = base or rate
                table.add_row(name, str(nproc), str(threads), f"{rate:,.0f}",
                              f"{rate / base:.2f}×")
    Console().print(table)
    print(f"load average (1 min) before/after: {load:.1f} / {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
