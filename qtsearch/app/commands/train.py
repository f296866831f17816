"""`qtsearch train`: learn a sentence encoder (Quick-Thoughts, FastSent, SDAE) from ordered text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from qtsearch.app.commands import train_options as shared
from qtsearch.app.commands.train_options import every, param, takes, train_and_report
from qtsearch.training.configs import (
    GRU_DEFAULTS,
    OBJECTIVE_ENCODERS,
    SCHEDULES,
    TRANSFORMER_DEFAULTS,
    TrainConfig,
)

HELP = """Train a sentence encoder on text in reading order.

CORPUS is one or more files or folders (plain or .gz): one sentence per line with a blank line
between documents, or running text with --split-sentences. The model folder (--out) gets
config.json, vocab.json, weights.safetensors and metrics.jsonl; Ctrl-C saves a checkpoint that
--resume continues exactly.

Objectives: qt (Quick-Thoughts: pick the neighbouring sentences among the batch; encoders uni,
bi, bow, mc or transformer), fastsent (sum of word vectors predicting the words of the previous
and next sentences; --fastsent-ae also its own words) and sdae (a GRU encoder reads the sentence
with words dropped and bigrams swapped, a GRU decoder rebuilds it; use a small --batch-size such
as 64, its softmax runs over every token). The transformer defaults to d_model (--hidden) """ + (
    f"{TRANSFORMER_DEFAULTS['hidden']},\n{TrainConfig.layers} layers, {TrainConfig.heads} heads, "
    "pre-layer-norm, learned positions, mean pooling, and "
    f"{TRANSFORMER_DEFAULTS['warmup_steps']} warm-up steps\nfollowed by the "
    f"{TRANSFORMER_DEFAULTS['lr_schedule']} learning-rate schedule.")

#: What an encoder name means, where the name alone does not say.
ENCODER_NOTES = {"mc": "MC-QT: frozen GloVe ⊕ trainable"}


def encoders_help() -> str:
    """Each objective's encoders, its default marked: the --encoder help."""
    parts = []
    for objective, names in OBJECTIVE_ENCODERS.items():
        shown = [f"{n} ({ENCODER_NOTES[n]})" if n in ENCODER_NOTES else n for n in names]
        shown[0] += " (default)" if len(names) > 1 else " (the only one)"
        parts.append(f"{objective}: {' | '.join(shown)}")
    return "; ".join(parts) + "."


def by_encoder(name: str) -> str:
    """The help's default of an option that depends on the encoder."""
    return f"{GRU_DEFAULTS[name]}; transformer {TRANSFORMER_DEFAULTS[name]}"


@takes(
    param("corpus", list[Path], typer.Argument(..., help="Text files or folders (plain or .gz).")),
    shared.OUT,
    param("objective", str, typer.Option(TrainConfig.objective,
                                         help=" | ".join(OBJECTIVE_ENCODERS) + ".")),
    param("encoder", str | None, typer.Option(TrainConfig.encoder, help=encoders_help())),
    param("hidden", int | None, typer.Option(
        TrainConfig.hidden, show_default=by_encoder("hidden"),
        help="GRU hidden size per direction; transformer d_model.")),
    param("layers", int, typer.Option(TrainConfig.layers, help="Transformer layers.")),
    param("heads", int, typer.Option(TrainConfig.heads,
                                     help="Transformer attention heads (must divide --hidden).")),
    param("word_dim", int, typer.Option(TrainConfig.word_dim,
                                        help="Trainable word-embedding size.")),
    param("vocab_size", int, typer.Option(TrainConfig.vocab_size,
                                          help="Most frequent words kept (plus <pad>, <unk>).")),
    param("max_len", int, typer.Option(
        TrainConfig.max_len, help="Tokens kept per sentence (longer ones are truncated).")),
    param("context", int, typer.Option(
        TrainConfig.context, help="Context window: 3 = previous and next sentence, 5 = ±2…")),
    param("batch_size", int, typer.Option(
        TrainConfig.batch_size, help="Contiguous sentences per batch (the candidates).")),
    param("lr", float, typer.Option(TrainConfig.lr,
                                    help="Adam learning rate (the peak, after any warm-up).")),
    param("warmup_steps", int | None, typer.Option(
        TrainConfig.warmup_steps, show_default=by_encoder("warmup_steps"),
        help="Linear learning-rate warm-up steps.")),
    param("lr_schedule", str | None, typer.Option(
        TrainConfig.lr_schedule, show_default=by_encoder("lr_schedule"),
        help=f"After the warm-up: {' | '.join(SCHEDULES)} (linear: to 0 at the last step).")),
    param("fastsent_ae", bool, typer.Option(
        TrainConfig.fastsent_ae, "--fastsent-ae",
        help="FastSent+AE: also predict the sentence's own words.")),
    param("word_dropout", float, typer.Option(TrainConfig.word_dropout,
                                              help="SDAE noise: word deletion probability p0.")),
    param("swap_prob", float, typer.Option(TrainConfig.swap_prob,
                                           help="SDAE noise: bigram swap probability px.")),
    param("epochs", int, typer.Option(TrainConfig.epochs,
                                      help="Passes over the training blocks.")),
    shared.MAX_STEPS, *shared.HARDWARE,
    param("split_sentences", bool, typer.Option(
        TrainConfig.split_sentences, "--split-sentences",
        help="Input is running text: split it into sentences.")),
    param("seed", int, typer.Option(TrainConfig.seed,
                                    help="Random seed (initialisation and block order).")),
    *every(TrainConfig), *shared.PROCESSES, *shared.SESSION,
)
def train_command(**arguments: Any) -> None:
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.trainer import train

    train_and_report(train, TrainConfig, arguments)


def register(app: typer.Typer) -> None:
    app.command("train", help=HELP)(train_command)
