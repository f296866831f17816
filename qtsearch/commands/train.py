"""`qtsearch train`: learn a Quick-Thoughts encoder from ordered text."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.commands.common import err, out
from qtsearch.training import TrainConfig, Trainer

HELP = """Train a Quick-Thoughts sentence encoder on text in reading order.

CORPUS is one or more files or folders (plain or .gz): one sentence per line with a blank line
between documents, or running text with --split-sentences. The model folder (--out) gets
config.json, vocab.json, weights.safetensors and metrics.jsonl; Ctrl-C saves a checkpoint that
--resume continues exactly."""


def train(
    corpus: list[Path] = typer.Argument(..., help="Text files or folders (plain or .gz)."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Model folder to write."),
    encoder: str = typer.Option(
        "uni", help="uni | bi | bow | mc (MC-QT: frozen GloVe ⊕ trainable)."
    ),
    hidden: int = typer.Option(1000, help="GRU hidden size per direction."),
    word_dim: int = typer.Option(300, help="Trainable word-embedding size."),
    vocab_size: int = typer.Option(50_000, help="Most frequent words kept (plus <pad>, <unk>)."),
    max_len: int = typer.Option(50, help="Tokens kept per sentence (longer ones are truncated)."),
    context: int = typer.Option(3, help="Context window: 3 = previous and next sentence, 5 = ±2…"),
    batch_size: int = typer.Option(400, help="Contiguous sentences per batch (the candidates)."),
    lr: float = typer.Option(5e-4, help="Adam learning rate."),
    epochs: int = typer.Option(1, help="Passes over the training blocks."),
    max_steps: int | None = typer.Option(
        None, help="Stop after this many steps (overrides --epochs)."
    ),
    device: str = typer.Option("auto", help="auto | cpu | cuda."),
    precision: str = typer.Option(
        "auto", help="auto (bf16 where the hardware has it) | fp32 | bf16."
    ),
    split_sentences: bool = typer.Option(
        False, "--split-sentences", help="Input is running text: split it into sentences."
    ),
    seed: int = typer.Option(0, help="Random seed (initialisation and block order)."),
    val_every: int = typer.Option(500, help="Validate every N steps."),
    checkpoint_every: int = typer.Option(1000, help="Checkpoint every N steps."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --out from its checkpoint."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    config = TrainConfig(
        corpus=[str(p) for p in corpus],
        out=str(out_dir),
        encoder=encoder,
        hidden=hidden,
        word_dim=word_dim,
        vocab_size=vocab_size,
        max_len=max_len,
        context=context,
        batch_size=batch_size,
        lr=lr,
        epochs=epochs,
        max_steps=max_steps,
        device=device,
        precision=precision,
        split_sentences=split_sentences,
        seed=seed,
        val_every=val_every,
        checkpoint_every=checkpoint_every,
    )
    result = Trainer(config, progress=not quiet, console=err).run(resume=resume)
    out.print(
        f"trained {result.steps:,} steps in {result.seconds:,.0f} s → {result.out}\n"
        f"validation context accuracy {result.val_accuracy:.3f} (chance {result.chance:.3f})"
    )


def register(app: typer.Typer) -> None:
    app.command(help=HELP)(train)
