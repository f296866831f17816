"""`qtsearch train-pairs`: learn an InferSent encoder from paraphrase pairs (in-batch contrast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from qtsearch.app.commands import train_options as shared
from qtsearch.app.commands.train_options import default, every, param, takes, train_and_report
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


@takes(
    param("files", list[Path], typer.Argument(..., help="Pair files (captions, NLI).")),
    shared.OUT,
    param("valid", list[Path], typer.Option(default(PairsTrainConfig, "valid"),
                                            help="Validation pair file (repeatable).")),
    param("valid_fraction", float, typer.Option(
        PairsTrainConfig.valid_fraction,
        help="Share of distinct anchors held out when no --valid is given.")),
    shared.HIDDEN,
    param("word_dim", int, typer.Option(PairsTrainConfig.word_dim,
                                        help="Trainable word embeddings concatenated to GloVe.")),
    *shared.WORDS, *shared.VOCAB_FROM, shared.MAX_LEN,
    param("batch_size", int, typer.Option(PairsTrainConfig.batch_size,
                                          help="Pairs per step (each anchor's candidates).")),
    *shared.PAIRS_TASK,
    param("lr", float, typer.Option(PairsTrainConfig.lr, help="Adam learning rate.")),
    param("epochs", int, typer.Option(PairsTrainConfig.epochs,
                                      help="Passes over the training pairs.")),
    shared.MAX_STEPS, *shared.EVAL_DATA, *shared.HARDWARE, shared.SEED, *every(PairsTrainConfig),
    *shared.PROCESSES, *shared.SESSION,
)
def train_pairs_command(**arguments: Any) -> None:
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.pairs_trainer import train_pairs

    train_and_report(train_pairs, PairsTrainConfig, arguments)


def register(app: typer.Typer) -> None:
    app.command("train-pairs", help=HELP)(train_pairs_command)
