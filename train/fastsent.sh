#!/usr/bin/env bash
# FastSent (Hill et al. 2016): sum of 100-d word vectors predicting the words of the previous and
# next sentences, as in the paper. Add --fastsent-ae for FastSent+AE. No recurrent network: the
# cheapest recipe (its cost is the softmax over the vocabulary).
# Corpus: the shared Gutenberg books 0000–0739 (running text), one epoch.
# Usage: bash train/fastsent.sh [OUT] [extra qtsearch train options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OUT="${1:-runs/fastsent}"
shift || true
qtsearch train "${BOOKS[@]}" --split-sentences --out "$OUT" --objective fastsent --word-dim 100 --vocab-size 50000 --batch-size 400 --lr 1e-3 --epochs 1 "$@"
