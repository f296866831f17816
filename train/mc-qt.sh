#!/usr/bin/env bash
# MC-QT: bi-GRU over frozen GloVe 6B-50d ⊕ bi-GRU over trainable embeddings.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch, paper defaults
# (B=400, context 3, Adam, max length 50). Usage: bash train/mc-qt.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/mc-qt}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --encoder mc --hidden 1200 --word-dim 300 --vocab-size 50000 --epochs 1 "$@"
