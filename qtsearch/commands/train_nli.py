"""`qtsearch train-nli`: learn an InferSent encoder from natural-language-inference pairs."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.commands.common import err, out
from qtsearch.training.nli import NLITrainConfig, NLITrainer, RunResult

HELP = (
    "Train an InferSent sentence encoder (BiLSTM, max pooling, frozen GloVe 50-d) on NLI pairs."
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


#: Options shared with `train-multitask` (a Typer option object may serve several commands).
OUT = typer.Option(..., "--out", "-o", help="Model folder to write.")
VALID = typer.Option([], help="NLI validation file (repeatable); default: held-out premises.")
VALID_FRACTION = typer.Option(
    0.1, help="Share of distinct premises held out when no --valid is given."
)
HIDDEN = typer.Option(256, help="LSTM units per direction (paper: 2048; vector 2×).")
WORD_DIM = typer.Option(
    0, help="Trainable word embeddings concatenated to GloVe (0: GloVe only, as the paper)."
)
GLOVE_WORDS = typer.Option(
    50_000, help="Most frequent GloVe words added to the vocabulary (lowercase + Capitalised)."
)
FC_DIM = typer.Option(512, help="Hidden units of the classifier MLP.")
DROPOUT = typer.Option(0.1, help="Dropout in the classifier MLP.")
MAX_LEN = typer.Option(50, help="Tokens kept per sentence.")
BATCH_SIZE = typer.Option(64, help="NLI pairs per step.")
LR = typer.Option(1e-3, help="Adam learning rate.")
MAX_STEPS = typer.Option(None, help="Stop after this many steps (overrides --epochs).")
DEVICE = typer.Option("auto", help="auto | cpu | cuda.")
PRECISION = typer.Option("auto", help="auto (bf16 where the hardware has it) | fp32 | bf16.")
SEED = typer.Option(0, help="Random seed (initialisation, split, batch order).")
VAL_EVERY = typer.Option(200, help="Validate every N steps.")
CHECKPOINT_EVERY = typer.Option(500, help="Checkpoint every N steps.")
RESUME = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoint.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress lines.")


def report(result: RunResult) -> str:
    """The closing lines: steps, time, folder and NLI validation accuracy before → after."""
    start = f"{result.first['val_accuracy']:.3f} at step 0 → " if result.first else ""
    return (f"trained {result.steps:,} steps in {result.seconds:,.0f} s → {result.out}\n"
            f"NLI validation accuracy {start}{result.last['val_accuracy']:.3f} "
            f"(majority class {result.last['chance']:.3f})")


def train_nli(
    files: list[Path] = typer.Argument(..., help="NLI training files (.jsonl, .txt, .gz)."),
    out_dir: Path = OUT,
    valid: list[Path] = VALID,
    valid_fraction: float = VALID_FRACTION,
    hidden: int = HIDDEN,
    word_dim: int = WORD_DIM,
    glove_words: int = GLOVE_WORDS,
    fc_dim: int = FC_DIM,
    dropout: float = DROPOUT,
    max_len: int = MAX_LEN,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    epochs: int = typer.Option(5, help="Passes over the training pairs."),
    max_steps: int | None = MAX_STEPS,
    device: str = DEVICE,
    precision: str = PRECISION,
    seed: int = SEED,
    val_every: int = VAL_EVERY,
    checkpoint_every: int = CHECKPOINT_EVERY,
    resume: bool = RESUME,
    quiet: bool = QUIET,
) -> None:
    config = NLITrainConfig(**nli_options(locals()))
    out.print(report(NLITrainer(config, progress=not quiet, console=err).run(resume=resume)))


def nli_options(arguments: dict) -> dict:
    """Command arguments → config fields (paths become strings; --resume, --quiet dropped)."""
    options = {k: v for k, v in arguments.items() if k not in ("resume", "quiet")}
    options["train"] = [str(p) for p in options.pop("files")]
    options["out"] = str(options.pop("out_dir"))
    options["valid"] = [str(p) for p in options["valid"]]
    return options


def register(app: typer.Typer) -> None:
    app.command("train-nli", help=HELP)(train_nli)
