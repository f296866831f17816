"""Copy a trained model folder into the package as the shipped default model, weights in fp16.

    python train/ship_model.py runs/default

Only config.json, vocab.json, metrics.jsonl and the weights are copied (no checkpoint, no token
cache); fp16 halves the size and changes vectors by far less than the model's own noise.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import torch

from qtsearch.models.folder import CONFIG, METRICS, VOCAB, WEIGHTS, load_model, save_weights

DEST = Path(__file__).resolve().parents[1] / "qtsearch" / "default_model"


def main(src: Path) -> None:
    model, _, _ = load_model(src)
    DEST.mkdir(parents=True, exist_ok=True)
    for name in (CONFIG, VOCAB, METRICS):
        shutil.copyfile(src / name, DEST / name)
    save_weights(DEST / WEIGHTS, model, torch.float16)
    size = sum(f.stat().st_size for f in DEST.iterdir()) / 1e6
    print(f"shipped {src} → {DEST} ({size:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
