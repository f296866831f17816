"""Options shared by the training commands (train, train-nli, train-pairs, train-multitask,
adapt), in one place: a Typer option object may serve several commands. Every default is read
from the training configs (qtsearch.training.configs, importable without torch), where it is
written once; tests/training/test_config_defaults.py checks every command against them."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer

from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.training.configs import InferSentConfig, NLITrainConfig, PairsOptions, RunConfig


def default(config: type, name: str) -> Any:
    """The default of a config's field, a fresh one where the field has a factory (a list)."""
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


OUT = typer.Option(..., "--out", "-o", help="Model folder to write.")
MAX_STEPS = typer.Option(RunConfig.max_steps,
                         help="Stop after this many steps (overrides --epochs).")
DEVICE = typer.Option(RunConfig.device, help="auto | cpu | cuda.")
PRECISION = typer.Option(RunConfig.precision,
                         help="auto (bf16 where the hardware has it) | fp32 | bf16.")
RESUME = typer.Option(False, "--resume", help="Continue the run in --out from its checkpoint.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar or lines.")
BATCHES_PER_STEP = typer.Option(
    RunConfig.batches_per_step, show_default="one per process",
    help="Batches whose gradients each step averages (the global batch): one process computes "
    "them in turn, N processes share them. --resume keeps the checkpoint's.")
NPROC = typer.Option(
    1, help="Train with N processes on this machine (one per GPU, or CPU processes with gloo), "
    "as `torchrun --nproc-per-node N -m qtsearch …` does.")
SEED = typer.Option(RunConfig.seed, help="Random seed (initialisation, split, batch order).")

# the InferSent trainers (train-nli, train-multitask, train-pairs)
VALID = typer.Option(default(InferSentConfig, "valid"),
                     help="NLI validation file (repeatable); default: held-out premises.")
VALID_FRACTION = typer.Option(
    InferSentConfig.valid_fraction,
    help="Share of distinct premises held out when no --valid is given.")
HIDDEN = typer.Option(InferSentConfig.hidden,
                      help="LSTM units per direction (paper: 2048; vector 2×).")
WORD_DIM = typer.Option(
    InferSentConfig.word_dim,
    help="Trainable word embeddings concatenated to GloVe (0: GloVe only, as the paper).")
PAIR_ENCODER = typer.Option(
    InferSentConfig.encoder, "--encoder",
    help="infersent: BiLSTM-max over frozen --word-vectors; mean: the mean of trainable word "
    "vectors started from --word-vectors (fast: no recurrence).")
NEGATION_SCOPE = typer.Option(
    InferSentConfig.negation_scope, "--negation-scope/--no-negation-scope",
    help="Mean encoder: the words after a negation (\"not\", \"no\", \"never\"… up to the next "
    "punctuation) are scaled by a trained vector, so that a negated sentence differs from its "
    "positive form by its own words, not only by the vector of \"not\".")
WORD_VECTORS = typer.Option(
    InferSentConfig.word_vectors,
    help=f"Pretrained word vectors: glove (6B-{WORD_VECTOR_DIMS['glove']}d) or model2vec "
    f"({WORD_VECTOR_DIMS['model2vec']}-d, distilled offline from all-MiniLM-L6-v2; needs the "
    "[encoders] extra).")
GLOVE_WORDS = typer.Option(
    InferSentConfig.glove_words,
    help="Most frequent GloVe words added to the vocabulary (lowercase + Capitalised).")
TRAIN_WORDS = typer.Option(
    InferSentConfig.train_words,
    help="Keep only the N most frequent words of the training sentences (0: all): a smaller "
    "word table to ship.")
VOCAB_FROM = typer.Option(
    default(InferSentConfig, "vocab_from"),
    help="More text files or folders (running text or WikiExtractor) whose most frequent "
    "words join the vocabulary (repeatable): books, Wikipedia, captions.")
VOCAB_FROM_WORDS = typer.Option(InferSentConfig.vocab_from_words,
                                help="Most frequent --vocab-from words added.")
FC_DIM = typer.Option(NLITrainConfig.fc_dim, help="Hidden units of the classifier MLP.")
DROPOUT = typer.Option(NLITrainConfig.dropout, help="Dropout in the classifier MLP.")
MAX_LEN = typer.Option(InferSentConfig.max_len, help="Tokens kept per sentence.")
BATCH_SIZE = typer.Option(InferSentConfig.batch_size, help="NLI pairs per step.")
LR = typer.Option(InferSentConfig.lr, help="Adam learning rate.")
VAL_EVERY = typer.Option(InferSentConfig.val_every, help="Validate every N steps.")
CHECKPOINT_EVERY = typer.Option(InferSentConfig.checkpoint_every,
                                help="Checkpoint every N steps.")


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
    PairsOptions.pairs_scale,
    help="Pairs: cosine × this are the softmax logits (an inverse temperature).")
HARD_NEGATIVES = typer.Option(
    PairsOptions.hard_negatives, "--hard-negatives/--no-hard-negatives",
    help="Pairs: an NLI contradiction of the anchor joins the candidates as a hard negative.",
)
NEGATIONS = typer.Option(
    PairsOptions.negations, "--negations/--no-negations",
    help="Pairs: a pair without a hard negative gets its positive negated by rule (\"A man is "
    "playing\" -> \"A man is not playing\") as one, so that the encoder learns what \"not\" "
    "does.",
)
DATA = typer.Option(
    PairsOptions.data, help="Data folder whose sts/ evaluation sentences are kept out of the "
    "pairs (default: $QTSEARCH_DATA, else ../shared/data beside a checkout).",
)
EVAL_FILTER = typer.Option(
    PairsOptions.eval_filter, "--eval-filter/--no-eval-filter",
    help="Drop every pair sharing a sentence with an evaluation file under DATA/sts.",
)
PAIRS_VAL_BATCHES = typer.Option(
    PairsOptions.pairs_val_batches,
    help="Pairs: validation batches (a fixed sample of the validation pairs).")
