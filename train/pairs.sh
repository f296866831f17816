#!/usr/bin/env bash
# Paraphrase pairs by in-batch contrast (`qtsearch train-pairs`): BiLSTM-max over frozen GloVe
# 6B-50d. Positives: captions of one image (Multi30k train, COCO val2017) and entailed
# hypotheses (the NLI CSVs: SNLI dev, MultiNLI dev, JOCI, SciTail, RTE), a contradicted
# hypothesis of the same premise as hard negative. Every pair sharing a sentence with an
# evaluation file under sts/ (STS 2012-16, STS-B, SICK, MSRP) is dropped and counted; the
# Multi30k val split validates.
# Usage: bash train/pairs.sh [OUT] [extra qtsearch train-pairs options]
set -euo pipefail
DATA="${QTSEARCH_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}"
OUT="${1:-runs/pairs}"
shift || true
qtsearch train-pairs "$DATA/pairs/multi30k/train.1.en.gz" \
  "$DATA/pairs/coco/captions_val2017.json.gz" "$DATA"/nli/nli_datasets/*/*.csv \
  --valid "$DATA/pairs/multi30k/val.1.en.gz" --data "$DATA" --out "$OUT" --hidden 512 \
  --batch-size 128 --epochs 1 "$@"
