"""Training throughput of Quick-Thoughts encoders on real text, against the matmul ceiling.

For each configuration it times full training steps (forward, QT loss, backward, Adam) on real
contiguous batches of the shared Gutenberg books and prints sentences/s, the GRU's share of
FLOPs per second, and that as a fraction of the dense matmul ceiling measured in the same
precision (2048² matmuls). Quote medians; run on an otherwise idle machine.

    python benchmarks/train_throughput.py                # paper config + bi, mc, bow
    python benchmarks/train_throughput.py --steps 10 --precision fp32
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from qtsearch.core.device import autocast_dtype, resolve_device
from qtsearch.encoders.nn.objective import qt_loss
from qtsearch.training.configs import TrainConfig
from qtsearch.training.trainer import text_loop

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "gutenberg"
BOOKS = [
    "0003-austen-jane--emma.txt.gz",
    "0728-dickens-charles--a-tale-of-two-cities.txt.gz",
    "0683-melville-herman--moby-dick-or-the-whale.txt.gz",
]
CONFIGS = {  # name: (encoder, hidden, word_dim)
    "uni H=1000 (paper)": ("uni", 1000, 300),
    "bi H=1000": ("bi", 1000, 300),
    "mc H=1000": ("mc", 1000, 300),
    "bow W=300": ("bow", 1, 300),
    "uni H=300": ("uni", 300, 300),
    "mc H=150 (default model)": ("mc", 150, 300),
}


def matmul_ceiling(device: torch.device, dtype: torch.dtype, reps: int = 10) -> float:
    """Dense square matmul FLOP/s: 2048² saturates the CPU, a GPU needs 8192²."""
    n = 8192 if device.type == "cuda" else 2048
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return 2 * n**3 / statistics.median(times[2:])


def gru_flops(encoder: str, hidden: int, word_dim: int, padded_tokens: int) -> float:
    """Training FLOPs of the GRUs of f and g (forward ×3 for forward + backward)."""
    if encoder == "bow":
        return 0.0
    per_token = {
        "uni": [(word_dim, hidden)],
        "bi": [(word_dim, hidden)] * 2,
        "mc": [(word_dim, hidden)] * 2 + [(50, hidden)] * 2,
    }[encoder]
    fwd = sum(2 * 3 * (i * h + h * h) for i, h in per_token) * padded_tokens
    return 3 * fwd * 2


def padded_tokens(lengths: torch.Tensor, group: int = 128) -> int:
    """Token steps the length-grouped GRU actually runs (see RNNReader)."""
    ordered = torch.sort(lengths, descending=True).values
    return sum(int(g.max()) * len(g) for g in ordered.split(group))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="timed steps per configuration")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=400)
    ap.add_argument("--only", nargs="*", help="configuration names (substring match)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    amp = autocast_dtype(device, args.precision)
    ceiling = matmul_ceiling(device, amp or torch.float32)
    console = Console()
    table = Table(
        title=f"QT training throughput, {device.type}, {torch.get_num_threads()} threads, "
        f"{'bf16 autocast' if amp else 'fp32'}, B={args.batch_size}, V=20k"
    )
    for col in (
        "config",
        "sent/s",
        "step s (median)",
        "GRU GFLOP/s",
        "matmul ceiling GFLOP/s",
        "ratio",
    ):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (encoder, hidden, word_dim) in CONFIGS.items():
            if args.only and not any(o in name for o in args.only):
                continue
            cfg = TrainConfig(
                corpus=[str(DATA / b) for b in BOOKS],
                out=f"{tmp}/{encoder}{hidden}",
                encoder=encoder,
                hidden=hidden,
                word_dim=word_dim,
                vocab_size=20_000,
                batch_size=args.batch_size,
                split_sentences=True,
                precision=args.precision,
                device=args.device,
            )
            loop = text_loop(cfg)
            blocks = loop.tasks[0].blocks
            times, flops = [], []
            for step in range(args.steps + 2):
                ids, lengths, docs = blocks.batch(blocks.block_at(step), loop.rt.device)
                t = time.perf_counter()
                with loop.rt.autocast():
                    f, g = loop.encoder(ids, lengths)
                st = qt_loss(f, g, docs, cfg.context)
                loop.optim.zero_grad(set_to_none=True)
                st.loss.backward()
                loop.optim.step()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                if step >= 2:  # warm-up steps excluded
                    times.append(time.perf_counter() - t)
                    flops.append(gru_flops(encoder, hidden, word_dim, padded_tokens(lengths.cpu())))
            med = statistics.median(times)
            rate = statistics.median(fl / t for fl, t in zip(flops, times))
            table.add_row(
                name,
                f"{args.batch_size / med:,.0f}",
                f"{med:.3f}",
                f"{rate / 1e9:,.0f}" if rate else "-",
                f"{ceiling / 1e9:,.0f}",
                f"{rate / ceiling:.2f}" if rate else "-",
            )
    console.print(table)


if __name__ == "__main__":
    main()
