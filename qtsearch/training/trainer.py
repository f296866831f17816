"""`qtsearch train`: Quick-Thoughts, FastSent or the SDAE on ordered text, in the one loop.

The model (qtsearch.encoders.nn: quick_thoughts.QuickThoughts, fastsent.FastSent, sdae.SDAE)
carries its objective; this module builds the data (qtsearch.training.objectives.corpus.Blocks),
the model and the loop.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.core.errors import UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.folder import build_model
from qtsearch.encoders.nn.objective import BatchStats, ObjectiveOptions
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig
from qtsearch.encoders.pretrained import glove_matrix
from qtsearch.text.reader import list_files
from qtsearch.training.checkpoint import writable_folder
from qtsearch.training.configs import TrainConfig
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.loop import Loop, RunResult, Runtime
from qtsearch.training.objectives.corpus import Blocks, CorpusTask

log = logging.getLogger("qtsearch")


def encoder_config(config: TrainConfig, vocab_len: int) -> EncoderConfig:
    """The network `config` trains, over a vocabulary of `vocab_len` words."""
    return EncoderConfig(encoder=config.encoder, vocab_size=vocab_len, word_dim=config.word_dim,
                         hidden=config.hidden, max_len=config.max_len, objective=config.objective,
                         layers=config.layers, heads=config.heads)


def objective_options(config: TrainConfig) -> ObjectiveOptions:
    return ObjectiveOptions(context=config.context, autoencode=config.fastsent_ae,
                            word_dropout=config.word_dropout, swap_prob=config.swap_prob)


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
    model = build_model(encoder_config(config, len(vocab)))
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
    options = objective_options(config)

    def objective(ids: Tensor, lengths: Tensor, docs: Tensor,
                  rng: np.random.Generator) -> BatchStats:
        return model.objective(ids, lengths, docs, options, rng)

    task = CorpusTask(config.objective, blocks, objective, runtime, model.metric, model.baseline)
    return Loop(config, runtime, display, model, blocks.data.vocab, [task], blocks.facts())


def train(config: TrainConfig, resume: bool = False,
          reporter: Reporter | None = None) -> RunResult:
    """Train a model (QT, FastSent or SDAE) into `config.out` (a model folder)."""
    return text_loop(config, reporter).run(resume)
