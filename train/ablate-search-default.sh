#!/usr/bin/env bash
# The ablation table of the default model (docs/experiments/default-model-history.md): the recipe of
# train/search-default.sh on the same budget (STEPS updates, default 1500), once with every task
# and once without each of QT, NLI, pairs and the teacher. The runs share the data caches
# (tokenised corpus, vocabulary counts) of runs/search-default, and the teacher vector cache.
# Then, e.g.: qtsearch bench relevance --tasks paraphrase --baselines none \
#   -m runs/ablation/all -m runs/ablation/no-qt ... ; qtsearch eval -t sts,relatedness ...
# Usage: [STEPS=1500] bash train/ablate-search-default.sh [OUT_ROOT] [extra options]
set -euo pipefail
HERE="$(dirname "$0")"
STEPS="${STEPS:-1500}"
ROOT_OUT="${1:-runs/ablation}"
shift || true
mkdir -p "$ROOT_OUT" runs/search-default/cache
for run in all no-qt no-nli no-pairs no-teacher; do
  out="$ROOT_OUT/$run"
  mkdir -p "$out"
  [ -e "$out/cache" ] || ln -s "$(realpath runs/search-default/cache)" "$out/cache"
  case "$run" in
    no-qt) export QT_TASK=0 ;;
    no-nli) export NLI_TASK=0 ;;
    no-pairs) export PAIRS_TASK=0 ;;
    no-teacher) export TEACHER_SENTENCES=0 ;;
  esac
  if [ ! -f "$out/weights.safetensors" ]; then
    bash "$HERE/search-default.sh" "$out" --max-steps "$STEPS" --checkpoint-every "$STEPS" \
      --val-every "$STEPS" "$@"
  fi
  unset QT_TASK NLI_TASK PAIRS_TASK TEACHER_SENTENCES
done
