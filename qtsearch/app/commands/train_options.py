"""Options shared by the training commands (train, train-nli, train-pairs, train-multitask,
adapt), in one place, and the run every one of them ends with. A command lists its parameters
with `takes`: its own beside these shared ones (or groups of them), in the order --help shows.
Every default is read from the training configs (qtsearch.training.configs, importable without
torch), where it is written once; tests/training/test_config_defaults.py checks every command
against them."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from qtsearch.app.commands.common import err, out
from qtsearch.app.progress_bars import RichReporter
from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.training.configs import InferSentConfig, NLITrainConfig, PairsOptions, RunConfig

Command = TypeVar("Command", bound=Callable[..., Any])


def default(config: type, name: str) -> Any:
    """The default of a config's field, a fresh one where the field has a factory (a list)."""
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def param(name: str, annotation: Any, info: Any) -> inspect.Parameter:
    """One parameter of a command: its name, its type and its typer.Option or typer.Argument."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=annotation)


def takes(*params: inspect.Parameter) -> Callable[[Command], Command]:
    """Give a command (`def command(**arguments)`) these parameters, in this order. Typer reads
    a function's signature; a written one could not take a group of shared options, so this
    one is set."""

    def decorate(command: Command) -> Command:
        command.__signature__ = inspect.Signature(list(params))  # type: ignore[attr-defined]
        return command

    return decorate


OUT = param("out_dir", Path, typer.Option(..., "--out", "-o", help="Model folder to write."))
MAX_STEPS = param("max_steps", int | None, typer.Option(
    RunConfig.max_steps, help="Stop after this many steps (overrides --epochs)."))
#: Where it runs: --device, --precision.
HARDWARE = (
    param("device", str, typer.Option(RunConfig.device, help="auto | cpu | cuda.")),
    param("precision", str, typer.Option(
        RunConfig.precision, help="auto (bf16 where the hardware has it) | fp32 | bf16.")),
)
SEED = param("seed", int, typer.Option(
    RunConfig.seed, help="Random seed (initialisation, split, batch order)."))
#: How many processes share a step: --batches-per-step, --nproc (cli.main starts them).
PROCESSES = (
    param("batches_per_step", int | None, typer.Option(
        RunConfig.batches_per_step, show_default="one per process",
        help="Batches whose gradients each step averages (the global batch): one process "
        "computes them in turn, N processes share them. --resume keeps the checkpoint's.")),
    param("nproc", int, typer.Option(
        1, help="Train with N processes on this machine (one per GPU, or CPU processes with "
        "gloo), as `torchrun --nproc-per-node N -m qtsearch …` does.")),
)
#: --resume, --quiet: how this run starts and what it prints, not what it trains.
SESSION = (
    param("resume", bool, typer.Option(
        False, "--resume", help="Continue the run in --out from its checkpoint.")),
    param("quiet", bool, typer.Option(
        False, "--quiet", "-q", help="No progress bar or lines.")),
)


def every(config: type) -> tuple[inspect.Parameter, inspect.Parameter]:
    """--val-every and --checkpoint-every with the defaults of the command's config."""
    return (
        param("val_every", int, typer.Option(
            default(config, "val_every"), help="Validate every N steps.")),
        param("checkpoint_every", int, typer.Option(
            default(config, "checkpoint_every"), help="Checkpoint every N steps.")),
    )

# the InferSent trainers (train-nli, train-multitask, train-pairs)
VALID = param("valid", list[Path], typer.Option(
    default(InferSentConfig, "valid"),
    help="NLI validation file (repeatable); default: held-out premises."))
VALID_FRACTION = param("valid_fraction", float, typer.Option(
    InferSentConfig.valid_fraction,
    help="Share of distinct premises held out when no --valid is given."))
HIDDEN = param("hidden", int, typer.Option(
    InferSentConfig.hidden, help="LSTM units per direction (paper: 2048; vector 2×)."))
WORD_DIM = param("word_dim", int, typer.Option(
    InferSentConfig.word_dim,
    help="Trainable word embeddings concatenated to GloVe (0: GloVe only, as the paper)."))
#: The words the encoder reads and what it makes of them.
WORDS = (
    param("glove_words", int, typer.Option(
        InferSentConfig.glove_words,
        help="Most frequent GloVe words added to the vocabulary (lowercase + Capitalised).")),
    param("encoder", str, typer.Option(
        InferSentConfig.encoder, "--encoder",
        help="infersent: BiLSTM-max over frozen --word-vectors; mean: the mean of trainable "
        "word vectors started from --word-vectors (fast: no recurrence).")),
    param("negation_scope", bool, typer.Option(
        InferSentConfig.negation_scope, "--negation-scope/--no-negation-scope",
        help="Mean encoder: the words after a negation (\"not\", \"no\", \"never\"… up to the "
        "next punctuation) are scaled by a trained vector, so that a negated sentence differs "
        "from its positive form by its own words, not only by the vector of \"not\".")),
    param("word_vectors", str, typer.Option(
        InferSentConfig.word_vectors,
        help=f"Pretrained word vectors: glove (6B-{WORD_VECTOR_DIMS['glove']}d) or model2vec "
        f"({WORD_VECTOR_DIMS['model2vec']}-d, distilled offline from all-MiniLM-L6-v2; needs "
        "the [encoders] extra).")),
    param("train_words", int, typer.Option(
        InferSentConfig.train_words,
        help="Keep only the N most frequent words of the training sentences (0: all): a "
        "smaller word table to ship.")),
)
#: More corpora whose words join the vocabulary.
VOCAB_FROM = (
    param("vocab_from", list[Path], typer.Option(
        default(InferSentConfig, "vocab_from"),
        help="More text files or folders (running text or WikiExtractor) whose most frequent "
        "words join the vocabulary (repeatable): books, Wikipedia, captions.")),
    param("vocab_from_words", int, typer.Option(
        InferSentConfig.vocab_from_words, help="Most frequent --vocab-from words added.")),
)
#: The NLI classifier on the two sentence vectors.
CLASSIFIER = (
    param("fc_dim", int, typer.Option(NLITrainConfig.fc_dim,
                                      help="Hidden units of the classifier MLP.")),
    param("dropout", float, typer.Option(NLITrainConfig.dropout,
                                         help="Dropout in the classifier MLP.")),
)
MAX_LEN = param("max_len", int, typer.Option(InferSentConfig.max_len,
                                             help="Tokens kept per sentence."))
BATCH_SIZE = param("batch_size", int, typer.Option(InferSentConfig.batch_size,
                                                   help="NLI pairs per step."))
LR = param("lr", float, typer.Option(InferSentConfig.lr, help="Adam learning rate."))

# the pairs task (train-pairs, train-multitask --pairs)
PAIRS_TASK = (
    param("pairs_scale", float, typer.Option(
        PairsOptions.pairs_scale,
        help="Pairs: cosine × this are the softmax logits (an inverse temperature).")),
    param("pairs_val_batches", int, typer.Option(
        PairsOptions.pairs_val_batches,
        help="Pairs: validation batches (a fixed sample of the validation pairs).")),
    param("hard_negatives", bool, typer.Option(
        PairsOptions.hard_negatives, "--hard-negatives/--no-hard-negatives",
        help="Pairs: an NLI contradiction of the anchor joins the candidates as a hard "
        "negative.")),
    param("negations", bool, typer.Option(
        PairsOptions.negations, "--negations/--no-negations",
        help="Pairs: a pair without a hard negative gets its positive negated by rule (\"A man "
        "is playing\" -> \"A man is not playing\") as one, so that the encoder learns what "
        "\"not\" does.")),
)
#: The evaluation sentences kept out of the pairs.
EVAL_DATA = (
    param("data", Path | None, typer.Option(
        PairsOptions.data, help="Data folder whose sts/ evaluation sentences are kept out of "
        "the pairs (default: $QTSEARCH_DATA, else ../shared/data beside a checkout).")),
    param("eval_filter", bool, typer.Option(
        PairsOptions.eval_filter, "--eval-filter/--no-eval-filter",
        help="Drop every pair sharing a sentence with an evaluation file under DATA/sts.")),
)

#: Command arguments that fill a config field of another name.
RENAMED = {"out_dir": "out", "files": "train"}
#: Arguments of the run, not of the config (cli.main starts the --nproc processes).
RUN_ONLY = ("resume", "quiet", "nproc")


def config_options(config: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """Command arguments → the config's fields: --out fills `out` and FILES `train`, paths
    become strings and a repeatable option given no value an empty list (a config holds what
    JSON can); --resume, --quiet and --nproc are dropped."""
    lists = {f.name for f in dataclasses.fields(config) if f.default_factory is list}
    options = {}
    for name, value in arguments.items():
        if name in RUN_ONLY:
            continue
        field = RENAMED.get(name, name)
        if field in lists:
            value = [str(p) for p in value or []]
        elif isinstance(value, Path):
            value = str(value)
        options[field] = value
    return options


def train_and_report(trainer: Callable[..., Any], config: type,
                     arguments: dict[str, Any]) -> None:
    """Fill the command's config from its arguments, train as --resume and --quiet say, and
    print the result's summary."""
    result = trainer(config(**config_options(config, arguments)), resume=arguments["resume"],
                     reporter=RichReporter(not arguments["quiet"], err))
    out.print(result.summary())
