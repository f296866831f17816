"""Copy a trained model folder into the package as the shipped default model, weights in fp16.

    python train/ship_model.py runs/mc150

Only config.json, vocab.json, the weights and the metrics up to the checkpoint are copied (no
checkpoint, no token cache); fp16 halves the size and changes vectors far less than training noise.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch

from qtsearch.models.folder import (
    CONFIG,
    METRICS,
    VOCAB,
    WEIGHTS,
    load_model,
    read_metrics,
    save_weights,
)

DEST = Path(__file__).resolve().parents[1] / "qtsearch" / "default_model"


def main(src: Path) -> None:
    model, _, _ = load_model(src)
    DEST.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG, VOCAB):
        shutil.copyfile(src / name, DEST / name)
    # the weights are those of the last checkpoint: keep only the metrics logged up to it
    state = src / "checkpoint" / "state.json"
    last = json.loads(state.read_text())["step"] if state.is_file() else float("inf")
    rows = [r for r in read_metrics(src) if r.get("step", 0) <= last]
    (DEST / METRICS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    save_weights(DEST / WEIGHTS, model, torch.float16)
    size = sum(f.stat().st_size for f in DEST.iterdir()) / 1e6
    print(f"shipped {src} → {DEST} ({size:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
