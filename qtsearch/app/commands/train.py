"""`qtsearch train`: learn a sentence encoder (Quick-Thoughts, FastSent, SDAE) from ordered text."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import err, out
from qtsearch.app.commands.train_options import (
    BATCHES_PER_STEP,
    DEVICE,
    MAX_STEPS,
    NPROC,
    OUT,
    PRECISION,
    QUIET,
    RESUME,
    config_options,
)
from qtsearch.app.progress import RichReporter

HELP = """Train a sentence encoder on text in reading order.

CORPUS is one or more files or folders (plain or .gz): one sentence per line with a blank line
between documents, or running text with --split-sentences. The model folder (--out) gets
config.json, vocab.json, weights.safetensors and metrics.jsonl; Ctrl-C saves a checkpoint that
--resume continues exactly.

Objectives: qt (Quick-Thoughts: pick the neighbouring sentences among the batch; encoders uni,
bi, bow, mc or transformer), fastsent (sum of word vectors predicting the words of the previous
and next sentences; --fastsent-ae also its own words) and sdae (a GRU encoder reads the sentence
with words dropped and bigrams swapped, a GRU decoder rebuilds it; use a small --batch-size such
as 64, its softmax runs over every token). The transformer defaults to d_model (--hidden) 512,
4 layers, 8 heads, pre-layer-norm, learned positions, mean pooling, and 1000 warm-up steps
followed by an inverse-square-root decay."""


def train_command(
    corpus: list[Path] = typer.Argument(..., help="Text files or folders (plain or .gz)."),
    out_dir: Path = OUT,
    objective: str = typer.Option("qt", help="qt | fastsent | sdae."),
    encoder: str | None = typer.Option(
        None,
        help="qt: uni (default) | bi | bow | mc (MC-QT: frozen GloVe ⊕ trainable) | "
        "transformer; sdae: uni (default) | bi; fastsent: bow (the only one).",
    ),
    hidden: int | None = typer.Option(
        None, show_default="1000; transformer 512",
        help="GRU hidden size per direction; transformer d_model.",
    ),
    layers: int = typer.Option(4, help="Transformer layers."),
    heads: int = typer.Option(8, help="Transformer attention heads (must divide --hidden)."),
    word_dim: int = typer.Option(300, help="Trainable word-embedding size."),
    vocab_size: int = typer.Option(50_000, help="Most frequent words kept (plus <pad>, <unk>)."),
    max_len: int = typer.Option(50, help="Tokens kept per sentence (longer ones are truncated)."),
    context: int = typer.Option(3, help="Context window: 3 = previous and next sentence, 5 = ±2…"),
    batch_size: int = typer.Option(400, help="Contiguous sentences per batch (the candidates)."),
    lr: float = typer.Option(5e-4, help="Adam learning rate (the peak, after any warm-up)."),
    warmup_steps: int | None = typer.Option(
        None, show_default="0; transformer 1000", help="Linear learning-rate warm-up steps."
    ),
    lr_schedule: str | None = typer.Option(
        None, show_default="constant; transformer inverse-sqrt",
        help="After the warm-up: constant | inverse-sqrt | linear (to 0 at the last step).",
    ),
    fastsent_ae: bool = typer.Option(
        False, "--fastsent-ae", help="FastSent+AE: also predict the sentence's own words."
    ),
    word_dropout: float = typer.Option(0.1, help="SDAE noise: word deletion probability p0."),
    swap_prob: float = typer.Option(0.1, help="SDAE noise: bigram swap probability px."),
    epochs: int = typer.Option(1, help="Passes over the training blocks."),
    max_steps: int | None = MAX_STEPS,
    device: str = DEVICE,
    precision: str = PRECISION,
    split_sentences: bool = typer.Option(
        False, "--split-sentences", help="Input is running text: split it into sentences."
    ),
    seed: int = typer.Option(0, help="Random seed (initialisation and block order)."),
    val_every: int = typer.Option(500, help="Validate every N steps."),
    checkpoint_every: int = typer.Option(1000, help="Checkpoint every N steps."),
    batches_per_step: int | None = BATCHES_PER_STEP,
    nproc: int = NPROC,
    resume: bool = RESUME,
    quiet: bool = QUIET,
) -> None:
    options = config_options(locals(), ("corpus",))
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.trainer import TrainConfig, train

    config = TrainConfig(**options)
    out.print(train(config, resume=resume, reporter=RichReporter(not quiet, err)).summary())


def register(app: typer.Typer) -> None:
    app.command("train", help=HELP)(train_command)
