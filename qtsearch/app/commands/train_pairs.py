"""`qtsearch train-pairs`: learn an InferSent encoder from paraphrase pairs (in-batch contrast)."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import err, out
from qtsearch.app.commands.train_options import (
    BATCHES_PER_STEP,
    DATA,
    DEVICE,
    EVAL_FILTER,
    GLOVE_WORDS,
    HARD_NEGATIVES,
    HIDDEN,
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
    VOCAB_FROM,
    VOCAB_FROM_WORDS,
    WORD_VECTORS,
    config_options,
    default,
)
from qtsearch.app.progress import RichReporter
from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.training.configs import PairsTrainConfig

HELP = (
    "Train an InferSent sentence encoder (BiLSTM, max pooling, frozen GloVe "
    f"{WORD_VECTOR_DIMS['glove']}-d) on paraphrase pairs by in-batch contrastive learning."
    "\n\n"
    "FILES: Multi30k caption files SPLIT.1.en\\[.gz] (SPLIT.2 … beside it; captions of one "
    "image pair up), COCO captions JSON, NLI files (premise,hypothesis,label CSV or any layout "
    "of train-nli: an entailed hypothesis is the premise's positive, a contradicted one its hard "
    "negative)."
    "\n\n"
    "Each anchor must pick its positive among all positives of the batch (and the hard "
    "negatives) by cosine similarity; the reverse direction counts too. Every pair sharing a "
    "sentence with an evaluation file under DATA/sts (STS 2012-16, STS-B, SICK, MSRP) is "
    "dropped first, and the count printed. Validation: --valid files (for Multi30k its val "
    "split) or held-out anchors; it reports in-batch retrieval accuracy against chance."
    "\n\n"
    "The model folder (--out) loads like any qtsearch model; Ctrl-C saves a checkpoint that "
    "--resume continues exactly."
)


def train_pairs_command(
    files: list[Path] = typer.Argument(..., help="Pair files (captions, NLI)."),
    out_dir: Path = OUT,
    valid: list[Path] = typer.Option(default(PairsTrainConfig, "valid"),
                                     help="Validation pair file (repeatable)."),
    valid_fraction: float = typer.Option(
        PairsTrainConfig.valid_fraction,
        help="Share of distinct anchors held out when no --valid is given."),
    hidden: int = HIDDEN,
    word_dim: int = typer.Option(PairsTrainConfig.word_dim,
                                 help="Trainable word embeddings concatenated to GloVe."),
    glove_words: int = GLOVE_WORDS,
    encoder: str = PAIR_ENCODER,
    negation_scope: bool = NEGATION_SCOPE,
    word_vectors: str = WORD_VECTORS,
    train_words: int = TRAIN_WORDS,
    vocab_from: list[Path] = VOCAB_FROM,
    vocab_from_words: int = VOCAB_FROM_WORDS,
    max_len: int = MAX_LEN,
    batch_size: int = typer.Option(PairsTrainConfig.batch_size,
                                   help="Pairs per step (each anchor's candidates)."),
    pairs_scale: float = PAIRS_SCALE,
    pairs_val_batches: int = PAIRS_VAL_BATCHES,
    hard_negatives: bool = HARD_NEGATIVES,
    negations: bool = NEGATIONS,
    lr: float = typer.Option(PairsTrainConfig.lr, help="Adam learning rate."),
    epochs: int = typer.Option(PairsTrainConfig.epochs, help="Passes over the training pairs."),
    max_steps: int | None = MAX_STEPS,
    data: Path | None = DATA,
    eval_filter: bool = EVAL_FILTER,
    device: str = DEVICE,
    precision: str = PRECISION,
    seed: int = SEED,
    val_every: int = typer.Option(PairsTrainConfig.val_every, help="Validate every N steps."),
    checkpoint_every: int = typer.Option(PairsTrainConfig.checkpoint_every,
                                         help="Checkpoint every N steps."),
    batches_per_step: int | None = BATCHES_PER_STEP,
    nproc: int = NPROC,
    resume: bool = RESUME,
    quiet: bool = QUIET,
) -> None:
    options = config_options(locals(), ("files", "valid", "vocab_from"))
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.pairs import train_pairs

    config = PairsTrainConfig(train=options.pop("files"), **options)
    out.print(train_pairs(config, resume=resume, reporter=RichReporter(not quiet, err)).summary())


def register(app: typer.Typer) -> None:
    app.command("train-pairs", help=HELP)(train_pairs_command)
