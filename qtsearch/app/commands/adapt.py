"""`qtsearch adapt`: fit a mean-of-words model to a corpus, without labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from qtsearch.app.commands import train_options as shared
from qtsearch.app.commands.train_options import every, param, takes, train_and_report
from qtsearch.training.configs import HELD_OUT, AdaptConfig

HELP = (
    "Adapt a model to your corpus: its words, its neighbouring sentences, its titles; no labels."
    "\n\n"
    "Starts from the shipped default model (or --model, any mean-of-words model folder) and "
    "trains on the corpus alone: corpus words the model lacks get vectors (started from the "
    "sentences they occur in), each sentence learns its neighbours (Quick-Thoughts), each title "
    "the sentences of its document, each sentence the rest of its document (inverse cloze); "
    "optionally all-MiniLM-L6-v2's vectors of a corpus sample (--teacher minilm, encoded within "
    "--teacher-budget). An L2 pull towards the base keeps its general skills. CORPUS: text "
    "files or folders (as for build-index) or JSON Lines records with \"title\" and \"text\" "
    f"(a BEIR corpus.jsonl.gz). Every {HELD_OUT}th document is held out: validation shows how "
    "well the model finds a held-out sentence's neighbour before (step 0) and after. "
    "--max-minutes stops cleanly with the model saved; Ctrl-C saves a checkpoint that --resume "
    "continues exactly."
)


@takes(
    param("corpus", list[Path], typer.Argument(
        ..., help="Text files, folders or .jsonl(.gz) records.")),
    shared.OUT,
    param("model", str | None, typer.Option(
        AdaptConfig.model, "--model", "-m",
        help="Base model folder (default: the shipped model).")),
    param("split_sentences", bool, typer.Option(
        AdaptConfig.split_sentences, "--split-sentences/--lines",
        help="Text files are running text (split into sentences; a blank line ends a document) "
        "or one sentence a line.")),
    param("new_words", int, typer.Option(AdaptConfig.new_words,
                                         help="Corpus words added at most (most frequent).")),
    param("min_count", int, typer.Option(AdaptConfig.min_count,
                                         help="Occurrences a corpus word needs to be added.")),
    param("neighbours", bool, typer.Option(AdaptConfig.neighbours, "--neighbours/--no-neighbours",
                                           help="Neighbouring sentences as positive pairs.")),
    param("titles", bool, typer.Option(
        AdaptConfig.titles, "--titles/--no-titles",
        help="Titles and their document's sentences as positive pairs.")),
    param("ict", bool, typer.Option(
        AdaptConfig.ict, "--ict/--no-ict",
        help="A sentence and the rest of its document as positive pairs.")),
    param("teacher", str | None, typer.Option(
        AdaptConfig.teacher,
        help="minilm: also learn all-MiniLM-L6-v2's vectors of a corpus sample.")),
    # the config counts seconds; the option takes a time as people write it
    param("teacher_budget", str, typer.Option(
        f"{AdaptConfig.teacher_budget / 60:g}m",
        help="Time the teacher may spend encoding (e.g. 90s, 10m).")),
    param("teacher_sample", int, typer.Option(AdaptConfig.teacher_sample, "--teacher-sentences",
                                              help="Teacher: corpus sentences sampled at most.")),
    param("anchor", float, typer.Option(
        AdaptConfig.anchor, help="Weight of a pull of known words towards the base model (0: "
        "none; only the corpus's words train either way).")),
    param("batch_size", int, typer.Option(AdaptConfig.batch_size,
                                          help="Pairs per step (each against the others).")),
    param("scale", float, typer.Option(AdaptConfig.scale,
                                       help="Cosine × this are the contrastive logits.")),
    param("doc_len", int, typer.Option(AdaptConfig.doc_len,
                                       help="Tokens of a document's rest (inverse cloze).")),
    param("max_len", int | None, typer.Option(
        AdaptConfig.max_len,
        help="Tokens of a sentence the adapted model trains on (default: the base's).")),
    param("max_minutes", float | None, typer.Option(
        AdaptConfig.max_minutes,
        help="Stop cleanly after this long, the model saved (--resume continues).")),
    param("lr", float, typer.Option(AdaptConfig.lr, help="Adam learning rate.")),
    param("epochs", int, typer.Option(AdaptConfig.epochs,
                                      help="Passes over every task's pairs.")),
    shared.MAX_STEPS, *shared.HARDWARE, shared.SEED, *every(AdaptConfig), *shared.SESSION,
)
def adapt_command(**arguments: Any) -> None:
    arguments["teacher_budget"] = seconds(arguments["teacher_budget"])
    # imported here, not at the top: torch loads only once the line is parsed
    from qtsearch.training.adapt_trainer import adapt

    train_and_report(adapt, AdaptConfig, arguments)


def seconds(text: str) -> float:
    """'90s', '10m', '1h' or a plain number of seconds."""
    from qtsearch.core.errors import UsageError

    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    factor = units.get(t[-1:])
    try:
        value = float(t[:-1] if factor else t)
    except ValueError:
        raise UsageError(f"--teacher-budget {text!r}: give a time such as 90s, 10m or 1h") from None
    if not value > 0:
        raise UsageError("--teacher-budget must be a positive time")
    return value * (factor or 1)


def register(app: typer.Typer) -> None:
    app.command("adapt", help=HELP)(adapt_command)
