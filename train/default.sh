#!/usr/bin/env bash
# The exact command that trained the shipped default model (qtsearch/default_model/); the record
# of the run (wall time, hardware, metrics) is in docs/experiments/lab-notebook.md. The run was
# stopped with Ctrl-C (a checkpoint is saved) when its time budget ran out; `--resume` continues it.
# Then: python train/ship_model.py runs/mc150   (fp16 weights into qtsearch/default_model/)
set -euo pipefail
source "$(dirname "$0")/_books.sh"
OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 \
MALLOC_TOP_PAD_=1073741824 \
qtsearch train "${BOOKS[@]}" --split-sentences --out "${1:-runs/mc150}" --encoder mc \
  --hidden 150 --word-dim 300 --vocab-size 20000 --batch-size 400 --lr 1e-3 --epochs 1 \
  --val-every 250 --checkpoint-every 250 "${@:2}"
