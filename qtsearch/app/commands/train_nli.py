"""`qtsearch train-nli`: learn an InferSent encoder from natural-language-inference pairs."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import err, out
from qtsearch.app.commands.train_options import (
    BATCH_SIZE,
    BATCHES_PER_STEP,
    CHECKPOINT_EVERY,
    DEVICE,
    DROPOUT,
    FC_DIM,
    GLOVE_WORDS,
    HIDDEN,
    LR,
    MAX_LEN,
    MAX_STEPS,
    NEGATION_SCOPE,
    NPROC,
    OUT,
    PAIR_ENCODER,
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
)
from qtsearch.app.progress import RichReporter
from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.training.configs import NLITrainConfig

HELP = (
    "Train an InferSent sentence encoder (BiLSTM, max pooling, frozen GloVe "
    f"{WORD_VECTOR_DIMS['glove']}-d) on NLI pairs."
    "\n\n"
    "FILES are NLI files in any of these layouts, detected per file: SNLI/MultiNLI JSON lines "
    "(sentence1, sentence2, gold_label), SNLI/MultiNLI .txt with a header row, or "
    "premise<TAB>hypothesis<TAB>…<TAB>label (label 0/1/2 = entailment/neutral/contradiction, "
    "or the words). Pairs without a gold label (\"-\") are skipped."
    "\n\n"
    "Without --valid, a --valid-fraction of the distinct premises is held out for validation. "
    "The classifier is an MLP on \\[u, v, |u−v|, u*v] of the two sentence vectors. Adam; "
    "validation accuracy is printed next to the majority-class rate."
    "\n\n"
    "The model folder (--out) loads like any qtsearch model (eval, build-index, bench "
    "analogy); Ctrl-C saves a checkpoint that --resume continues exactly."
)


def train_nli_command(
    files: list[Path] = typer.Argument(..., help="NLI training files (.jsonl, .txt, .gz)."),
    out_dir: Path = OUT,
    valid: list[Path] = VALID,
    valid_fraction: float = VALID_FRACTION,
    hidden: int = HIDDEN,
    word_dim: int = WORD_DIM,
    glove_words: int = GLOVE_WORDS,
    encoder: str = PAIR_ENCODER,
    negation_scope: bool = NEGATION_SCOPE,
    word_vectors: str = WORD_VECTORS,
    train_words: int = TRAIN_WORDS,
    vocab_from: list[Path] = VOCAB_FROM,
    vocab_from_words: int = VOCAB_FROM_WORDS,
    fc_dim: int = FC_DIM,
    dropout: float = DROPOUT,
    max_len: int = MAX_LEN,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    epochs: int = typer.Option(NLITrainConfig.epochs, help="Passes over the training pairs."),
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
    options = config_options(locals(), ("files", "valid", "vocab_from"))
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.nli import train_nli

    config = NLITrainConfig(train=options.pop("files"), **options)
    out.print(train_nli(config, resume=resume, reporter=RichReporter(not quiet, err)).summary())


def register(app: typer.Typer) -> None:
    app.command("train-nli", help=HELP)(train_nli_command)
