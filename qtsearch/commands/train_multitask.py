"""`qtsearch train-multitask`: one shared encoder trained on Quick-Thoughts and NLI (GenSen)."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.commands.common import err, out
from qtsearch.commands.train_nli import (
    BATCH_SIZE,
    CHECKPOINT_EVERY,
    DEVICE,
    DROPOUT,
    FC_DIM,
    GLOVE_WORDS,
    HIDDEN,
    LR,
    MAX_LEN,
    MAX_STEPS,
    OUT,
    PRECISION,
    QUIET,
    RESUME,
    SEED,
    VAL_EVERY,
    VALID,
    VALID_FRACTION,
    WORD_DIM,
    nli_options,
    report,
)
from qtsearch.training.multitask import MultitaskConfig, MultitaskTrainer

HELP = (
    "Train one sentence encoder on Quick-Thoughts and NLI together (GenSen-style)."
    "\n\n"
    "QT reads ordered text (CORPUS, as for `qtsearch train`), NLI reads pairs (--nli, as for "
    "`qtsearch train-nli`). "
    "The shared encoder is InferSent's BiLSTM-max over frozen GloVe; QT adds its own context "
    "encoder g (scores f(s)·g(t)), NLI its own classifier. Each step trains one task: "
    "--schedule proportional draws the task with probability proportional to its batches per "
    "epoch, round-robin alternates. One epoch = the QT batches plus the NLI batches."
    "\n\n"
    "Validation reports NLI accuracy and QT context accuracy. The model folder loads like any "
    "qtsearch model; Ctrl-C saves a checkpoint that --resume continues exactly."
)


def train_multitask(
    corpus: list[Path] = typer.Argument(..., help="Text files or folders for Quick-Thoughts."),
    files: list[Path] = typer.Option(..., "--nli", help="NLI training file (repeatable)."),
    out_dir: Path = OUT,
    split_sentences: bool = typer.Option(
        False, "--split-sentences", help="The corpus is running text: split it into sentences."
    ),
    schedule: str = typer.Option("proportional", help="proportional | round-robin."),
    valid: list[Path] = VALID,
    valid_fraction: float = VALID_FRACTION,
    hidden: int = HIDDEN,
    word_dim: int = WORD_DIM,
    glove_words: int = GLOVE_WORDS,
    vocab_size: int = typer.Option(
        20_000, help="Most frequent corpus words in the vocabulary (NLI and GloVe words added)."
    ),
    fc_dim: int = FC_DIM,
    dropout: float = DROPOUT,
    max_len: int = MAX_LEN,
    batch_size: int = BATCH_SIZE,
    qt_batch_size: int = typer.Option(128, help="Contiguous sentences per QT batch."),
    context: int = typer.Option(3, help="QT context window: 3 = previous and next sentence."),
    lr: float = LR,
    epochs: int = typer.Option(1, help="Passes over both tasks' data."),
    max_steps: int | None = MAX_STEPS,
    device: str = DEVICE,
    precision: str = PRECISION,
    seed: int = SEED,
    val_every: int = VAL_EVERY,
    checkpoint_every: int = CHECKPOINT_EVERY,
    resume: bool = RESUME,
    quiet: bool = QUIET,
) -> None:
    options = nli_options(locals())
    options["corpus"] = [str(p) for p in options["corpus"]]
    config = MultitaskConfig(**options)
    result = MultitaskTrainer(config, progress=not quiet, console=err).run(resume=resume)
    first = result.first or {}
    start = f"{first['qt_val_accuracy']:.3f} at step 0 → " if first else ""
    out.print(report(result) + f"\nQT context accuracy {start}"
              f"{result.last['qt_val_accuracy']:.3f} (chance {result.last['qt_chance']:.3f})")


def register(app: typer.Typer) -> None:
    app.command("train-multitask", help=HELP)(train_multitask)
