"""`qtsearch train-multitask`: one shared encoder trained on QT, NLI, pairs and a teacher
(GenSen-style)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from qtsearch.app.commands import train_options as shared
from qtsearch.app.commands.train_options import default, every, param, takes, train_and_report
from qtsearch.training.configs import TASK_SCHEDULES, MultitaskConfig

HELP = (
    "Train one sentence encoder on Quick-Thoughts, NLI and paraphrase pairs together "
    "(GenSen-style)."
    "\n\n"
    "QT reads ordered text (CORPUS, as for `qtsearch train`), NLI reads pairs (--nli, as for "
    "`qtsearch train-nli`), the optional pairs task paraphrase pairs (--pairs, as for "
    "`qtsearch train-pairs`, evaluation sentences dropped), the optional teacher task reads "
    "sentences of text files (--teacher, books or Wikipedia) whose all-MiniLM-L6-v2 vectors the "
    "encoder learns to match through a projection head (vectors computed once, cached on disk "
    "under --teacher-cache and reused by every run). "
    "Any task may be left out (the ablations), at least one is needed. "
    "The shared encoder is InferSent's BiLSTM-max over frozen --word-vectors, or with "
    "--encoder mean the mean of trainable word vectors started from them; QT adds its own context "
    "encoder g (scores f(s)·g(t)), NLI its own classifier; pairs compares the shared vectors. "
    "Each step trains one task: --schedule proportional draws the task with probability "
    "proportional to its batches per epoch, round-robin takes them in turn. One epoch = every "
    "task's batches."
    "\n\n"
    "Validation reports each task's figure. The model folder loads like any qtsearch model; "
    "Ctrl-C saves a checkpoint that --resume continues exactly."
)


@takes(
    param("corpus", list[Path], typer.Argument(
        None, help="Text files or folders for Quick-Thoughts (none: no QT task).")),
    param("files", list[Path], typer.Option(
        default(MultitaskConfig, "train"), "--nli",
        help="NLI training file (repeatable; none: no NLI task).")),
    shared.OUT,
    param("split_sentences", bool, typer.Option(
        MultitaskConfig.split_sentences, "--split-sentences",
        help="The corpus is running text: split it into sentences.")),
    param("schedule", str, typer.Option(MultitaskConfig.schedule,
                                        help=" | ".join(TASK_SCHEDULES) + ".")),
    param("pairs", list[Path], typer.Option(
        default(MultitaskConfig, "pairs"),
        help="Paraphrase pair file for the pairs task (repeatable; as for train-pairs).")),
    param("pairs_valid", list[Path], typer.Option(default(MultitaskConfig, "pairs_valid"),
                                                  help="Pairs validation file (repeatable).")),
    param("pairs_batch_size", int, typer.Option(MultitaskConfig.pairs_batch_size,
                                                help="Pairs per pairs step.")),
    param("qa", list[Path], typer.Option(
        default(MultitaskConfig, "qa"),
        help="Question-answer file for the qa task (repeatable): SQuAD JSON (its training "
        "articles; one in ten is held out for `bench retrieval`) or MedQuAD JSON Lines. "
        "Questions are contrasted with the sentences answering them, near misses as "
        "negatives.")),
    param("qa_batch_size", int, typer.Option(MultitaskConfig.qa_batch_size,
                                             help="Question-answer pairs per qa step.")),
    param("qa_valid_fraction", float, typer.Option(
        MultitaskConfig.qa_valid_fraction,
        help="Share of distinct questions held out to validate the qa task.")),
    param("teacher", list[Path], typer.Option(
        default(MultitaskConfig, "teacher"),
        help="Text file or folder (running text or WikiExtractor) for the teacher task "
        "(repeatable).")),
    param("teacher_sentences", int, typer.Option(
        MultitaskConfig.teacher_sentences,
        help="Teacher: sentences selected from the --teacher files (spread evenly).")),
    param("teacher_batch_size", int, typer.Option(MultitaskConfig.teacher_batch_size,
                                                  help="Teacher: sentences per teacher step.")),
    param("teacher_val_batches", int, typer.Option(MultitaskConfig.teacher_val_batches,
                                                   help="Teacher: held-out validation batches.")),
    param("teacher_cache", Path | None, typer.Option(
        MultitaskConfig.teacher_cache,
        help="Teacher: vector cache folder (default: $QTSEARCH_CACHE/teacher).")),
    *shared.PAIRS_TASK, *shared.EVAL_DATA, shared.VALID, shared.VALID_FRACTION, shared.HIDDEN,
    shared.WORD_DIM, *shared.WORDS,
    param("vocab_size", int, typer.Option(
        MultitaskConfig.vocab_size,
        help="Most frequent corpus words in the vocabulary (NLI and GloVe words added).")),
    *shared.VOCAB_FROM, *shared.CLASSIFIER, shared.MAX_LEN, shared.BATCH_SIZE,
    param("qt_batch_size", int, typer.Option(MultitaskConfig.qt_batch_size,
                                             help="Contiguous sentences per QT batch.")),
    param("context", int, typer.Option(MultitaskConfig.context,
                                       help="QT context window: 3 = previous and next sentence.")),
    shared.LR,
    param("epochs", int, typer.Option(MultitaskConfig.epochs,
                                      help="Passes over every task's data.")),
    shared.MAX_STEPS, *shared.HARDWARE, shared.SEED, *every(MultitaskConfig), *shared.PROCESSES,
    *shared.SESSION,
)
def train_multitask_command(**arguments: Any) -> None:
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.multitask import train_multitask

    train_and_report(train_multitask, MultitaskConfig, arguments)


def register(app: typer.Typer) -> None:
    app.command("train-multitask", help=HELP)(train_multitask_command)
