#!/usr/bin/env bash
# Quick-Thoughts with Transformer encoders f and g: pre-layer-norm, d_model 512, 4 layers, 8 heads,
# learned positions, mean pooling (1024-d vectors), 1000 linear warm-up steps then an
# inverse-square-root decay. GPU-sized. Compare with train/uni-qt.sh on the same books.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch, B=400, context 3.
# Usage: bash train/transformer-qt.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/transformer-qt}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --encoder transformer --hidden 512 --word-dim 512 --layers 4 --heads 8 --warmup-steps 1000 --lr-schedule inverse-sqrt --lr 5e-4 --vocab-size 50000 --epochs 1 "$@"
