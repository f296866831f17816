"""`qtsearch train`: Quick-Thoughts, FastSent or the SDAE on ordered text, in the one loop.

The model (models/encoders.QuickThoughts, models/fastsent.FastSent, models/sdae.SDAE) carries
its objective; this module builds the data (tasks/corpus.Blocks), the model and the loop.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.core.errors import UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.folder import build_model
from qtsearch.encoders.nn.objective import BatchStats, ObjectiveOptions
from qtsearch.encoders.nn.quick_thoughts import ENCODERS, EncoderConfig
from qtsearch.encoders.pretrained import glove_matrix
from qtsearch.text.reader import list_files
from qtsearch.training.checkpoint import writable_folder
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.loop import Loop, RunConfig, RunResult, Runtime
from qtsearch.training.objectives.corpus import Blocks, CorpusTask, check_context

log = logging.getLogger("qtsearch")

# the encoders each objective can train, the first being its default
OBJECTIVE_ENCODERS = {
    "qt": ("uni", *(e for e in ENCODERS if e != "uni")),
    "fastsent": ("bow",),  # FastSent is a bag of words by definition
    "sdae": ("uni", "bi"),
}
TRANSFORMER_DEFAULTS = {"hidden": 512, "warmup_steps": 1000, "lr_schedule": "inverse-sqrt"}
GRU_DEFAULTS = {"hidden": 1000, "warmup_steps": 0, "lr_schedule": "constant"}


@dataclass
class TrainConfig(RunConfig):
    """Everything that defines a training run on ordered text; saved in the model's config.json.

    None (encoder, hidden, warm-up, schedule) means the default of the objective and encoder:
    see OBJECTIVE_ENCODERS, TRANSFORMER_DEFAULTS and GRU_DEFAULTS.
    """

    corpus: list[str] = field(default_factory=list)
    objective: str = "qt"
    encoder: str | None = None
    hidden: int | None = None
    word_dim: int = 300
    vocab_size: int = 50_000
    max_len: int = 50
    context: int = 3
    batch_size: int = 400
    split_sentences: bool = False
    val_blocks: int = 50
    layers: int = 4  # transformer
    heads: int = 8  # transformer
    fastsent_ae: bool = False
    word_dropout: float = 0.1  # SDAE p0
    swap_prob: float = 0.1  # SDAE px

    #: The corpus files are checked through their signature (resolved path, size, time), so
    #: the same files named by another relative path still resume.
    RESUMABLE: ClassVar[frozenset[str]] = RunConfig.RESUMABLE | {"corpus"}

    def __post_init__(self) -> None:
        if self.encoder is None and self.objective in OBJECTIVE_ENCODERS:
            self.encoder = OBJECTIVE_ENCODERS[self.objective][0]
        defaults = TRANSFORMER_DEFAULTS if self.encoder == "transformer" else GRU_DEFAULTS
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def check(self) -> None:
        if self.objective not in OBJECTIVE_ENCODERS:
            raise UsageError(f"--objective must be one of {', '.join(OBJECTIVE_ENCODERS)}, "
                             f"not {self.objective!r}")
        allowed = OBJECTIVE_ENCODERS[self.objective]
        if self.encoder not in allowed:
            raise UsageError(f"--encoder for --objective {self.objective} must be one of "
                             f"{', '.join(allowed)}, not {self.encoder!r}")
        for name in ("word_dropout", "swap_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be in [0, 1)")
        check_context(self.context)
        self.check_run(("hidden", "word_dim", "vocab_size", "max_len", "batch_size",
                        "val_blocks", "layers", "heads"))
        if self.batch_size < self.context:
            raise UsageError("--batch-size must be larger than --context")
        if self.encoder == "transformer" and self.hidden % self.heads:
            raise UsageError("--heads must divide --hidden (the transformer's d_model)")

    def encoder_config(self, vocab_len: int) -> EncoderConfig:
        return EncoderConfig(encoder=self.encoder, vocab_size=vocab_len, word_dim=self.word_dim,
                             hidden=self.hidden, max_len=self.max_len, objective=self.objective,
                             layers=self.layers, heads=self.heads)

    def objective_options(self) -> ObjectiveOptions:
        return ObjectiveOptions(context=self.context, autoencode=self.fastsent_ae,
                                word_dropout=self.word_dropout, swap_prob=self.swap_prob)


def corpus_blocks(corpus: list[str], out: Path, split: bool, vocab_size: int, max_len: int,
                  batch_size: int, val_blocks: int, seed: int, display: Reporter) -> Blocks:
    """Check the corpus and the model folder, then tokenise into OUT/cache/corpus."""
    if not corpus:
        raise UsageError("give at least one corpus file or folder")
    list_files(corpus)  # missing paths fail before anything is written
    writable_folder(out)
    return Blocks.tokenise(corpus, out / "cache" / "corpus", split, vocab_size, max_len,
                           batch_size, val_blocks, seed, display)


def build_text_model(config: TrainConfig, blocks: Blocks, device: torch.device) -> nn.Module:
    """The model of the objective, seeded; FastSent's output bias from the training word counts,
    MC-QT's frozen table from GloVe."""
    torch.manual_seed(config.seed)
    vocab = blocks.data.vocab
    model = build_model(config.encoder_config(len(vocab)))
    if config.objective == "fastsent":
        model.set_word_frequencies(torch.from_numpy(blocks.train_word_counts()))
    if config.encoder == "mc":
        matrix, coverage = glove_matrix(vocab.words)
        model.set_frozen_vectors(torch.from_numpy(matrix))
        log.info("GloVe covers %.1f%% of the vocabulary", 100 * coverage)
    return model.to(device)


def text_loop(config: TrainConfig, reporter: Reporter | None = None) -> Loop:
    """Everything of a run but the running: data tokenised, model built, the loop ready."""
    config.check()
    runtime, display = Runtime.of(config), first_rank_only(reporter)
    blocks = corpus_blocks(config.corpus, Path(config.out), config.split_sentences,
                           config.vocab_size, config.max_len, config.batch_size,
                           config.val_blocks, config.seed, display)
    model = build_text_model(config, blocks, runtime.device)
    options = config.objective_options()

    def objective(ids: Tensor, lengths: Tensor, docs: Tensor,
                  rng: np.random.Generator) -> BatchStats:
        return model.objective(ids, lengths, docs, options, rng)

    task = CorpusTask(config.objective, blocks, objective, runtime, model.metric, model.baseline)
    return Loop(config, runtime, display, model, blocks.data.vocab, [task], blocks.facts())


def train(config: TrainConfig, resume: bool = False,
          reporter: Reporter | None = None) -> RunResult:
    """Train a model (QT, FastSent or SDAE) into `config.out` (a model folder)."""
    return text_loop(config, reporter).run(resume)
