#!/usr/bin/env bash
# The default model trained for search: one shared encoder trained GenSen-style on
# five tasks at once, the task of each step drawn in proportion to the tasks' batches per epoch.
#
# Encoder (ENCODER, default mean): the mean of trainable 256-d word vectors, started from the
# word vectors of a model2vec model distilled offline from all-MiniLM-L6-v2 (--word-vectors
# model2vec); the architecture was chosen by measurement (docs/experiments/default-model-history.md): on 2 CPU
# cores it trains ~10x faster than a BiLSTM and encodes far above the 3,000 sentences/s bound.
# Tasks:
#   - QT: 30 Wikipedia shards, wikipedia/AA/wiki_00-29 (running text; each article its own
#     document, the WikiExtractor markup dropped), contiguous batches of 400 sentences;
#   - NLI: SNLI test (pairs sharing a sentence with sts/ dropped);
#   - pairs (batches of 512: each positive against 511 others in the batch; 128, 256 and
#     1,024 measured in docs/experiments/default-model-history.md): Multi30k train and COCO val2017 same-image
#     captions, the NLI CSVs' entailed
#     hypotheses with a contradiction as hard negative, every other pair with its positive
#     negated by rule as one (--negations: "A man is playing" -> "A man is not playing"; set
#     NEGATIONS=0 to leave them out); every pair sharing a sentence with sts/ (STS 2012-16,
#     STS-B, SICK, MSRP) dropped, and no negation that is such a sentence; Multi30k val
#     validates;
#   - qa (batches of QA_BATCH_SIZE, 256): SQuAD v1.1 train's training articles (one article in
#     ten is held out for `qtsearch bench retrieval`) and MedQuAD, each question contrasted with
#     the sentence holding its answer, the paragraph's closest other sentence (SQuAD) or the
#     answer to another question on the same focus (MedQuAD) as a near miss; QA_TASK=0 leaves
#     it out;
#   - teacher: TEACHER_SENTENCES sentences spread over every tenth training book (74) and the
#     100 Wikipedia shards of wikipedia/AB (not the QT corpus), whose
#     all-MiniLM-L6-v2 vectors the encoder matches through a linear head. The teacher vectors
#     are computed once into TEACHER_CACHE (fp16 shards, resumable) and reused by every run
#     (ablations included): ~4 min per 100k sentences on the idle 2-core CPU (far longer
#     on a busy one), ~1 min per million on an H100.
# Vocabulary: the 30k most frequent words of the QT corpus + the 30k most frequent words of
# the training sentences + the 40k most frequent words of every tenth book, 60 Wikipedia shards
# and the Multi30k captions (--vocab-from); no GloVe words. Lookups fall back to another casing ("paris" ->
# "Paris"), so lowercase queries meet every word.
# Stop with Ctrl-C or kill; continue with: bash train/search-default.sh OUT --resume
# Ablations: train/ablate-search-default.sh (the same budget without each task; a task is
# left out with QT_TASK=0, NLI_TASK=0, PAIRS_TASK=0 or TEACHER_SENTENCES=0).
# Usage: [TEACHER_SENTENCES=60000] [TEACHER_CACHE=runs/teacher-cache] [ENCODER=mean] \
#   [NEGATIONS=1] bash train/search-default.sh [OUT] [extra qtsearch train-multitask options]
set -euo pipefail
source "$(dirname "$0")/_books.sh"  # BOOKS: the training books (0740-0757 held out for eval)
ROOT="$(dirname "$DATA")"
OUT="${1:-runs/search-default}"
shift || true
TENTH=("$DATA"/0[0-6][0-9]0-*.txt.gz "$DATA"/07[0-3]0-*.txt.gz)  # every tenth training book
WIKI=("$ROOT"/wikipedia/AA/wiki_[0-2]*.gz)  # 30 of the 200 Wikipedia shards: the QT corpus
N_TEACHER="${TEACHER_SENTENCES:-60000}"
TEACHER=()
if [ "$N_TEACHER" -gt 0 ]; then
  TEACHER=(--teacher-sentences "$N_TEACHER" --teacher-cache "${TEACHER_CACHE:-runs/teacher-cache}"
           --teacher-batch-size 32)
  for f in "${TENTH[@]}" "$ROOT/wikipedia/AB"; do TEACHER+=(--teacher "$f"); done
fi
VOCAB=()
for f in "${TENTH[@]}" "${WIKI[@]}" "$ROOT"/wikipedia/AB/wiki_[0-2]*.gz \
         "$ROOT/pairs/multi30k/train.1.en.gz"; do
  VOCAB+=(--vocab-from "$f")
done
PAIRS=()
if [ "${PAIRS_TASK:-1}" = 1 ]; then
  for f in "$ROOT/pairs/multi30k/train.1.en.gz" "$ROOT/pairs/coco/captions_val2017.json.gz" \
           "$ROOT"/nli/nli_datasets/*/*.csv; do
    PAIRS+=(--pairs "$f")
  done
  PAIRS+=(--pairs-valid "$ROOT/pairs/multi30k/val.1.en.gz")
  if [ "${NEGATIONS:-1}" = 1 ]; then PAIRS+=(--negations); fi
fi
QA=()
if [ "${QA_TASK:-1}" = 1 ]; then
  QA=(--qa "$ROOT/squad/train-v1.1.json.gz" --qa "$ROOT/medquad/medquad.jsonl.gz"
      --qa-batch-size "${QA_BATCH_SIZE:-256}")
fi
QT=()
[ "${QT_TASK:-1}" = 1 ] && QT=("${WIKI[@]}" --split-sentences)
NLI=()
[ "${NLI_TASK:-1}" = 1 ] && NLI=(--nli "$ROOT/nli/ketm/data/snli/test.txt")
qtsearch train-multitask "${QT[@]}" "${NLI[@]}" "${PAIRS[@]}" "${QA[@]}" --data "$ROOT" \
  "${TEACHER[@]}" "${VOCAB[@]}" --vocab-size 30000 --vocab-from-words 40000 \
  --train-words 30000 --glove-words 0 --encoder "${ENCODER:-mean}" --word-vectors model2vec \
  --out "$OUT" --batch-size 128 --qt-batch-size 400 --pairs-batch-size 512 \
  --schedule proportional --epochs 2 --val-every 500 --checkpoint-every 500 "$@"
