#!/usr/bin/env bash
# bi-GRU QT as in the paper (1200 per direction; 4800-d vectors). GPU-sized.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch, paper defaults
# (B=400, context 3, Adam, max length 50). Usage: bash train/bi-qt.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/bi-qt}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --encoder bi --hidden 1200 --word-dim 300 --vocab-size 50000 --epochs 1 "$@"
