#!/usr/bin/env bash
# InferSent (Conneau et al. 2017): BiLSTM-max over frozen GloVe 6B-50d, trained on NLI.
# Data reachable here: SNLI test (9,824 pairs) + SICK train (4,498 pairs); 10% of the premises
# are held out for validation (never SICK test, which `qtsearch eval` scores as SICK-E).
# 512 units per direction (1,024-d vectors), 4 epochs: ~6 min on one CPU core.
# With the full corpora: qtsearch train-nli snli_1.0_train.jsonl multinli_1.0_train.jsonl \
#   --valid snli_1.0_dev.jsonl --hidden 2048 --out runs/infersent-allnli   (GPU-sized)
# Usage: bash train/infersent.sh [OUT] [extra qtsearch train-nli options]
set -euo pipefail
NLI="${QTSEARCH_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}/nli/ketm/data"
OUT="${1:-runs/infersent}"
shift || true
qtsearch train-nli "$NLI/snli/test.txt" "$NLI/sick/train.txt" --out "$OUT" --hidden 512 --epochs 4 "$@"
