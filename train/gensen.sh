#!/usr/bin/env bash
# GenSen-style multi-task: one shared InferSent encoder (BiLSTM-max over frozen GloVe 6B-50d)
# trained on Quick-Thoughts (the Gutenberg training books, running text) and NLI (SNLI test +
# SICK train; 10% of the premises held out), the task of each step drawn in proportion to the
# tasks' batches per epoch. N_BOOKS limits the corpus to the first N training books (the CPU
# run in the README used N_BOOKS=10 --max-steps 1000).
# Usage: [N_BOOKS=10] bash train/gensen.sh [OUT] [extra qtsearch train-multitask options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"
NLI="$(dirname "$DATA")/nli/ketm/data"
OUT="${1:-runs/gensen}"
shift || true
qtsearch train-multitask "${BOOKS[@]:0:${N_BOOKS:-${#BOOKS[@]}}}" --split-sentences \
  --nli "$NLI/snli/test.txt" --nli "$NLI/sick/train.txt" --out "$OUT" --hidden 256 \
  --schedule proportional --epochs 1 "$@"
