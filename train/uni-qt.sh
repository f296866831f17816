#!/usr/bin/env bash
# uni-GRU QT as in the paper (H=2400 per encoder; 4800-d vectors). GPU-sized.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch, paper defaults
# (B=400, context 3, Adam, max length 50). Usage: bash train/uni-qt.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/uni-qt}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --encoder uni --hidden 2400 --word-dim 300 --vocab-size 50000 --epochs 1 "$@"
