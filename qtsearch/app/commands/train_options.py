"""Options shared by the training commands (train, train-nli, train-pairs, train-multitask),
in one place: a Typer option object may serve several commands."""

from __future__ import annotations

from typing import Any

import typer

OUT = typer.Option(..., "--out", "-o", help="Model folder to write.")
MAX_STEPS = typer.Option(None, help="Stop after this many steps (overrides --epochs).")
DEVICE = typer.Option("auto", help="auto | cpu | cuda.")
PRECISION = typer.Option("auto", help="auto (bf16 where the hardware has it) | fp32 | bf16.")
RESUME = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoint.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar or lines.")
BATCHES_PER_STEP = typer.Option(
    None, show_default="one per process",
    help="Batches whose gradients each step averages (the global batch): one process computes "
    "them in turn, N processes share them. --resume keeps the checkpoint's.")
NPROC = typer.Option(
    1, help="Train with N processes on this machine (one per GPU, or CPU processes with gloo), "
    "as `torchrun --nproc-per-node N -m qtsearch …` does.")

# the InferSent trainers (train-nli, train-multitask, train-pairs)
VALID = typer.Option([], help="NLI validation file (repeatable); default: held-out premises.")
VALID_FRACTION = typer.Option(
    0.1, help="Share of distinct premises held out when no --valid is given."
)
HIDDEN = typer.Option(256, help="LSTM units per direction (paper: 2048; vector 2×).")
WORD_DIM = typer.Option(
    0, help="Trainable word embeddings concatenated to GloVe (0: GloVe only, as the paper)."
)
PAIR_ENCODER = typer.Option(
    "infersent", "--encoder",
    help="infersent: BiLSTM-max over frozen --word-vectors; mean: the mean of trainable word "
    "vectors started from --word-vectors (fast: no recurrence).")
NEGATION_SCOPE = typer.Option(
    False, "--negation-scope/--no-negation-scope",
    help="Mean encoder: the words after a negation (\"not\", \"no\", \"never\"… up to the next "
    "punctuation) are scaled by a trained vector, so that a negated sentence differs from its "
    "positive form by its own words, not only by the vector of \"not\".")
WORD_VECTORS = typer.Option(
    "glove", help="Pretrained word vectors: glove (6B-50d) or model2vec (256-d, distilled "
    "offline from all-MiniLM-L6-v2; needs the [encoders] extra).")
GLOVE_WORDS = typer.Option(
    50_000, help="Most frequent GloVe words added to the vocabulary (lowercase + Capitalised)."
)
TRAIN_WORDS = typer.Option(
    0, help="Keep only the N most frequent words of the training sentences (0: all): a "
    "smaller word table to ship.")
VOCAB_FROM = typer.Option(
    [], help="More text files or folders (running text or WikiExtractor) whose most frequent "
    "words join the vocabulary (repeatable): books, Wikipedia, captions."
)
VOCAB_FROM_WORDS = typer.Option(50_000, help="Most frequent --vocab-from words added.")
FC_DIM = typer.Option(512, help="Hidden units of the classifier MLP.")
DROPOUT = typer.Option(0.1, help="Dropout in the classifier MLP.")
MAX_LEN = typer.Option(50, help="Tokens kept per sentence.")
BATCH_SIZE = typer.Option(64, help="NLI pairs per step.")
LR = typer.Option(1e-3, help="Adam learning rate.")
SEED = typer.Option(0, help="Random seed (initialisation, split, batch order).")
VAL_EVERY = typer.Option(200, help="Validate every N steps.")
CHECKPOINT_EVERY = typer.Option(500, help="Checkpoint every N steps.")


def config_options(arguments: dict[str, Any], lists: tuple[str, ...] = ()) -> dict[str, Any]:
    """Command arguments → config fields: --out and the path lists `lists` become strings,
    --resume, --quiet and --nproc (cli.main starts the processes) are dropped."""
    options = {k: v for k, v in arguments.items() if k not in ("resume", "quiet", "nproc")}
    options["out"] = str(options.pop("out_dir"))
    for name in lists:
        options[name] = [str(p) for p in options[name] or []]
    if options.get("data") is not None:
        options["data"] = str(options["data"])
    return options

# the pairs task (train-pairs, train-multitask --pairs)
PAIRS_SCALE = typer.Option(
    20.0, help="Pairs: cosine × this are the softmax logits (an inverse temperature)."
)
HARD_NEGATIVES = typer.Option(
    True, "--hard-negatives/--no-hard-negatives",
    help="Pairs: an NLI contradiction of the anchor joins the candidates as a hard negative.",
)
NEGATIONS = typer.Option(
    False, "--negations/--no-negations",
    help="Pairs: a pair without a hard negative gets its positive negated by rule (\"A man is "
    "playing\" -> \"A man is not playing\") as one, so that the encoder learns what \"not\" "
    "does.",
)
DATA = typer.Option(
    None, help="Data folder whose sts/ evaluation sentences are kept out of the pairs "
    "(default: $QTSEARCH_DATA, else ../shared/data beside a checkout).",
)
EVAL_FILTER = typer.Option(
    True, "--eval-filter/--no-eval-filter",
    help="Drop every pair sharing a sentence with an evaluation file under DATA/sts.",
)
PAIRS_VAL_BATCHES = typer.Option(
    20, help="Pairs: validation batches (a fixed sample of the validation pairs)."
)
