"""Copy a trained model folder into the package as the shipped default model, weights in fp16.

    python train/ship_model.py runs/search-default [--fit centre] [--lexical-weight 0.3] \
        [--dest runs/candidate]

Only config.json, vocab.json, the weights and the metrics up to the checkpoint are copied (no
checkpoint, no token cache, no task heads), a mean model's pieces table is fitted to its words
(qtsearch.encoders.pieces: its open vocabulary), and the model card (README.md) is kept for
updating;
fp16 halves the size and changes vectors far less than training noise. `--fit` and
`--lexical-weight` record the search settings measured for the model (config.json "search"):
`build-index --fit auto` then fits what the model wants and hybrid search weighs BM25 as
measured, instead of the engine's defaults.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch

from qtsearch.core.config import write_json_atomic
from qtsearch.encoders.files import CONFIG, METRICS, VOCAB, WEIGHTS, read_config, read_metrics
from qtsearch.encoders.nn.folder import load_model, save_weights
from qtsearch.encoders.pieces import write_pieces
from qtsearch.index.transform import canonical_fit

DEST = Path(__file__).resolve().parents[1] / "qtsearch" / "default_model"
CARD = "README.md"


def main(src: Path, fit: str | None, lexical_weight: float | None, dest: Path = DEST) -> None:
    model, _, _ = load_model(src)
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.iterdir():
        if old.name != CARD:  # the model card is written by hand: update it for the new model
            old.unlink()
    shutil.copyfile(src / VOCAB, dest / VOCAB)
    config = read_config(src)
    search = {"fit": canonical_fit(fit) if fit else None, "lexical_weight": lexical_weight}
    if any(v is not None for v in search.values()):
        config["search"] = {k: v for k, v in search.items() if v is not None}
    write_json_atomic(dest / CONFIG, config)
    # the weights are those of the last checkpoint: keep only the metrics logged up to it
    state = src / "checkpoint" / "state.json"
    last = json.loads(state.read_text())["step"] if state.is_file() else float("inf")
    rows = [r for r in read_metrics(src) if r.get("step", 0) <= last]
    (dest / METRICS).write_text("".join(json.dumps(r) + "\n" for r in rows))
    save_weights(dest / WEIGHTS, model, torch.float16)
    if config["encoder"].get("encoder") == "mean":  # its open vocabulary, fitted to the table
        write_pieces(dest)
    size = sum(f.stat().st_size for f in dest.iterdir()) / 1e6
    print(f"shipped {src} → {dest} ({size:.1f} MB)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("--fit", help="What `build-index --fit auto` fits for this model.")
    parser.add_argument("--lexical-weight", type=float, help="BM25's weight in hybrid search.")
    parser.add_argument("--dest", type=Path, default=DEST,
                        help="Where to write it (default: the package's default model; "
                             "another folder makes a candidate to measure first).")
    args = parser.parse_args()
    main(args.src, args.fit, args.lexical_weight, args.dest)
