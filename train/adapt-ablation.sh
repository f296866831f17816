#!/usr/bin/env bash
# The ablation behind `qtsearch adapt`'s defaults (docs/adapt.md): each row adapts a base model
# (BASE, default: the shipped one) to a BEIR corpus (the corpus only: queries and judgments are
# for scoring) with one change from the defaults, then scores it through build-index + search
# on the development queries (SciFact train, NFCorpus dev) with benchmarks/adapt_beir.py.
# The first ablation ran with lr 1e-3 and --anchor 0.01 and a base without a pieces table (its
# new words start from their sentences alone): EXTRA="--lr 1e-3 --anchor 0.01" BASE=folder.
# Usage: [BASE=model] [EXTRA=options] [OUT=runs/adapt] bash train/adapt-ablation.sh [ROW...]
set -euo pipefail
DATA="${DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}/beir"
OUT="${OUT:-runs/adapt}"
declare -A ROWS=(
  [default]=""
  [vocab-only]="--max-steps 1 --lr 1e-9"
  [no-neighbours]="--no-neighbours"
  [no-titles]="--no-titles"
  [no-ict]="--no-ict"
  [anchor-0]="--anchor 0"
  [anchor-0.01]="--anchor 0.01"
  [lr-1e-3]="--lr 1e-3"
  [lr-3e-3]="--lr 3e-3"
  [epochs-1]="--epochs 1"
  [epochs-6]="--epochs 6"
  [max-len-256]="--max-len 256"
  [teacher-2m]="--teacher minilm --teacher-budget 2m"
)
ORDER=(default vocab-only no-ict no-titles no-neighbours anchor-0.01 lr-1e-3 epochs-1
       max-len-256 teacher-2m epochs-6)
mkdir -p "$OUT"
for row in "${@:-${ORDER[@]}}"; do
  for pair in scifact:train nfcorpus:dev; do
    name=${pair%%:*} split=${pair##*:}
    model="$OUT/$name-$row"
    if [ ! -f "$model/config.json" ]; then
      start=$(date +%s)
      # shellcheck disable=SC2086
      OMP_NUM_THREADS=1 nice -n 5 qtsearch adapt "$DATA/$name/corpus.jsonl.gz" --out "$model" \
        -q ${BASE:+--model "$BASE"} ${EXTRA:-} ${ROWS[$row]} > "$model.log" 2>&1
      echo "$name $row: adapted in $(( $(date +%s) - start )) s" | tee -a "$OUT/ablation.txt"
    fi
    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/adapt_beir.py "$DATA/$name" --split "$split" \
      -m "$model" --work "$OUT/indexes" 2>/dev/null | tee -a "$OUT/ablation.txt"
  done
done
