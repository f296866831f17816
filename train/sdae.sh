#!/usr/bin/env bash
# SDAE (Hill et al. 2016): a uni-GRU encoder (H=2400) reads sentences with words deleted (p0=0.1)
# and bigrams swapped (px=0.1); a GRU decoder rebuilds them. GPU-sized. Batches of 64 sentences:
# the decoder's softmax runs over every token of the batch.
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch.
# Usage: bash train/sdae.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/sdae}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --objective sdae --encoder uni --hidden 2400 --word-dim 300 --vocab-size 50000 --batch-size 64 --word-dropout 0.1 --swap-prob 0.1 --epochs 1 "$@"
