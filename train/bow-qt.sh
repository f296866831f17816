#!/usr/bin/env bash
# Bag-of-words QT (mean word vectors): minutes on a CPU.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch, paper defaults
# (B=400, context 3, Adam, max length 50). Usage: bash train/bow-qt.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/bow-qt}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --encoder bow --hidden 1 --word-dim 300 --vocab-size 50000 --lr 3e-3 --epochs 1 "$@"
