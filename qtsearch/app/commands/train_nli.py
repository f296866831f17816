"""`qtsearch train-nli`: learn an InferSent encoder from natural-language-inference pairs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from qtsearch.app.commands import train_options as shared
from qtsearch.app.commands.train_options import every, param, takes, train_and_report
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


@takes(
    param("files", list[Path], typer.Argument(
        ..., help="NLI training files (.jsonl, .txt, .gz).")),
    shared.OUT, shared.VALID, shared.VALID_FRACTION, shared.HIDDEN, shared.WORD_DIM, *shared.WORDS,
    *shared.VOCAB_FROM, *shared.CLASSIFIER, shared.MAX_LEN, shared.BATCH_SIZE, shared.LR,
    param("epochs", int, typer.Option(NLITrainConfig.epochs,
                                      help="Passes over the training pairs.")),
    shared.MAX_STEPS, *shared.HARDWARE, shared.SEED, *every(NLITrainConfig), *shared.PROCESSES,
    *shared.SESSION,
)
def train_nli_command(**arguments: Any) -> None:
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.nli_trainer import train_nli

    train_and_report(train_nli, NLITrainConfig, arguments)


def register(app: typer.Typer) -> None:
    app.command("train-nli", help=HELP)(train_nli_command)
