#!/usr/bin/env bash
# The default model trained for search (issue 21): one shared InferSent encoder (BiLSTM-max over
# frozen GloVe 6B-50d) trained GenSen-style on four tasks at once, the task of each step drawn in
# proportion to the tasks' batches per epoch:
#   - QT: the Gutenberg training books + the 12,980 Wikipedia articles (running text; the
#     WikiExtractor <doc> lines and titles are dropped, each article its own document);
#   - NLI: SNLI test + SICK train (10% of the premises held out);
#   - pairs: Multi30k train and COCO val2017 same-image captions, the NLI CSVs' entailed
#     hypotheses with a contradiction as hard negative; every pair sharing a sentence with
#     sts/ (STS 2012-16, STS-B, SICK, MSRP) dropped; Multi30k val validates;
#   - teacher: TEACHER_SENTENCES sentences spread over the training books and Wikipedia, whose
#     all-MiniLM-L6-v2 vectors the encoder matches through a linear head. The teacher vectors
#     are computed once into TEACHER_CACHE (fp16 shards, resumable) and reused by every run
#     (ablations included): ~1 min per million sentences on an H100, ~2.5 h on the 2-core CPU.
# Vocabulary: the 100k most frequent words of books + Wikipedia (QT corpus) + the 50k most
# frequent words of books, Wikipedia and the Multi30k captions (--vocab-from) + every training
# sentence's words + the 50k most frequent GloVe words (lowercase and Capitalised).
# Stop with Ctrl-C or kill; continue with: bash train/search-default.sh OUT --resume
# HIDDEN (default 512) is not yet chosen by measurement: the issue bounds it by speed (the
# shipped model must embed >= 3,000 sentences/s on the 2-core CPU); measure before shipping.
# Ablations (same budget without a task): drop its options, e.g. TEACHER_SENTENCES=0.
# Usage: [TEACHER_SENTENCES=1000000] [TEACHER_CACHE=runs/teacher-cache] [HIDDEN=512] \
#   bash train/search-default.sh [OUT] [extra qtsearch train-multitask options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"  # BOOKS: the training books (0740-0757 held out for eval)
ROOT="$(dirname "$DATA")"
OUT="${1:-runs/search-default}"
shift || true
N_TEACHER="${TEACHER_SENTENCES:-1000000}"
TEACHER=()
if [ "$N_TEACHER" -gt 0 ]; then
  TEACHER=(--teacher-sentences "$N_TEACHER" --teacher-cache "${TEACHER_CACHE:-runs/teacher-cache}"
           --teacher-batch-size 256)
  for f in "${BOOKS[@]}" "$ROOT/wikipedia"; do TEACHER+=(--teacher "$f"); done
fi
VOCAB=()
for f in "${BOOKS[@]}" "$ROOT/wikipedia" "$ROOT/pairs/multi30k/train.1.en.gz"; do
  VOCAB+=(--vocab-from "$f")
done
PAIRS=()
for f in "$ROOT/pairs/multi30k/train.1.en.gz" "$ROOT/pairs/coco/captions_val2017.json.gz" \
         "$ROOT"/nli/nli_datasets/*/*.csv; do
  PAIRS+=(--pairs "$f")
done
qtsearch train-multitask "${BOOKS[@]}" "$ROOT/wikipedia" --split-sentences \
  --nli "$ROOT/nli/ketm/data/snli/test.txt" --nli "$ROOT/nli/ketm/data/sick/train.txt" \
  "${PAIRS[@]}" --pairs-valid "$ROOT/pairs/multi30k/val.1.en.gz" --data "$ROOT" \
  "${TEACHER[@]}" "${VOCAB[@]}" --vocab-size 100000 --vocab-from-words 50000 \
  --out "$OUT" --hidden "${HIDDEN:-512}" --batch-size 128 --qt-batch-size 400 \
  --pairs-batch-size 128 --schedule proportional --epochs 1 --val-every 1000 \
  --checkpoint-every 2000 "$@"
