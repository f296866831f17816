"""`qtsearch train-multitask`: one shared encoder trained on QT, NLI, pairs and a teacher
(GenSen-style)."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import err, out
from qtsearch.app.commands.train_options import (
    BATCH_SIZE,
    BATCHES_PER_STEP,
    CHECKPOINT_EVERY,
    DATA,
    DEVICE,
    DROPOUT,
    EVAL_FILTER,
    FC_DIM,
    GLOVE_WORDS,
    HARD_NEGATIVES,
    HIDDEN,
    LR,
    MAX_LEN,
    MAX_STEPS,
    NEGATION_SCOPE,
    NEGATIONS,
    NPROC,
    OUT,
    PAIR_ENCODER,
    PAIRS_SCALE,
    PAIRS_VAL_BATCHES,
    PRECISION,
    QUIET,
    RESUME,
    SEED,
    TRAIN_WORDS,
    VAL_EVERY,
    VALID,
    VALID_FRACTION,
    VOCAB_FROM,
    VOCAB_FROM_WORDS,
    WORD_DIM,
    WORD_VECTORS,
    config_options,
    default,
)
from qtsearch.app.progress import RichReporter
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


def train_multitask_command(
    corpus: list[Path] = typer.Argument(
        None, help="Text files or folders for Quick-Thoughts (none: no QT task)."),
    files: list[Path] = typer.Option(
        default(MultitaskConfig, "train"), "--nli",
        help="NLI training file (repeatable; none: no NLI task)."),
    out_dir: Path = OUT,
    split_sentences: bool = typer.Option(
        MultitaskConfig.split_sentences, "--split-sentences",
        help="The corpus is running text: split it into sentences."),
    schedule: str = typer.Option(MultitaskConfig.schedule, help=" | ".join(TASK_SCHEDULES) + "."),
    pairs: list[Path] = typer.Option(
        default(MultitaskConfig, "pairs"),
        help="Paraphrase pair file for the pairs task (repeatable; as for train-pairs)."),
    pairs_valid: list[Path] = typer.Option(default(MultitaskConfig, "pairs_valid"),
                                           help="Pairs validation file (repeatable)."),
    pairs_batch_size: int = typer.Option(MultitaskConfig.pairs_batch_size,
                                         help="Pairs per pairs step."),
    teacher: list[Path] = typer.Option(
        default(MultitaskConfig, "teacher"),
        help="Text file or folder (running text or WikiExtractor) for the teacher task "
        "(repeatable)."),
    teacher_sentences: int = typer.Option(
        MultitaskConfig.teacher_sentences,
        help="Teacher: sentences selected from the --teacher files (spread evenly)."),
    teacher_batch_size: int = typer.Option(MultitaskConfig.teacher_batch_size,
                                           help="Teacher: sentences per teacher step."),
    teacher_val_batches: int = typer.Option(MultitaskConfig.teacher_val_batches,
                                            help="Teacher: held-out validation batches."),
    teacher_cache: Path | None = typer.Option(
        MultitaskConfig.teacher_cache,
        help="Teacher: vector cache folder (default: $QTSEARCH_CACHE/teacher)."),
    pairs_scale: float = PAIRS_SCALE,
    pairs_val_batches: int = PAIRS_VAL_BATCHES,
    hard_negatives: bool = HARD_NEGATIVES,
    negations: bool = NEGATIONS,
    data: Path | None = DATA,
    eval_filter: bool = EVAL_FILTER,
    valid: list[Path] = VALID,
    valid_fraction: float = VALID_FRACTION,
    hidden: int = HIDDEN,
    word_dim: int = WORD_DIM,
    glove_words: int = GLOVE_WORDS,
    encoder: str = PAIR_ENCODER,
    negation_scope: bool = NEGATION_SCOPE,
    word_vectors: str = WORD_VECTORS,
    train_words: int = TRAIN_WORDS,
    vocab_size: int = typer.Option(
        MultitaskConfig.vocab_size,
        help="Most frequent corpus words in the vocabulary (NLI and GloVe words added)."),
    vocab_from: list[Path] = VOCAB_FROM,
    vocab_from_words: int = VOCAB_FROM_WORDS,
    fc_dim: int = FC_DIM,
    dropout: float = DROPOUT,
    max_len: int = MAX_LEN,
    batch_size: int = BATCH_SIZE,
    qt_batch_size: int = typer.Option(MultitaskConfig.qt_batch_size,
                                      help="Contiguous sentences per QT batch."),
    context: int = typer.Option(MultitaskConfig.context,
                                help="QT context window: 3 = previous and next sentence."),
    lr: float = LR,
    epochs: int = typer.Option(MultitaskConfig.epochs, help="Passes over every task's data."),
    max_steps: int | None = MAX_STEPS,
    device: str = DEVICE,
    precision: str = PRECISION,
    seed: int = SEED,
    val_every: int = VAL_EVERY,
    checkpoint_every: int = CHECKPOINT_EVERY,
    batches_per_step: int | None = BATCHES_PER_STEP,
    nproc: int = NPROC,
    resume: bool = RESUME,
    quiet: bool = QUIET,
) -> None:
    options = config_options(locals(),
                             ("corpus", "files", "valid", "pairs", "pairs_valid", "teacher",
                              "vocab_from"))
    if teacher_cache is not None:
        options["teacher_cache"] = str(teacher_cache)
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.multitask import train_multitask

    config = MultitaskConfig(train=options.pop("files"), **options)
    result = train_multitask(config, resume=resume, reporter=RichReporter(not quiet, err))
    out.print(result.summary())


def register(app: typer.Typer) -> None:
    app.command("train-multitask", help=HELP)(train_multitask_command)
