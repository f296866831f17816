"""Objectives on ordered text (Quick-Thoughts, FastSent, the SDAE): batches of contiguous
sentences.

The corpus is tokenised once into a `TokenCorpus`; it is cut into blocks of B contiguous
sentences (sentences are never shuffled, blocks are); a few evenly spaced blocks are held out
for validation. The block order of epoch e is a permutation drawn from (seed, e), so a batch's
number alone fixes its data; any noise of the objective (the SDAE's) is drawn from (seed, batch).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.core.errors import InputError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.objective import BatchStats, pooled
from qtsearch.text.token_corpus import TokenCorpus
from qtsearch.training.loop import Runtime

#: objective(ids, lengths, docs, rng) → the statistics of one batch.
Objective = Callable[[Tensor, Tensor, Tensor, np.random.Generator], BatchStats]


class Blocks:
    """A tokenised corpus cut into training and validation blocks of `batch_size` sentences."""

    def __init__(self, data: TokenCorpus, batch_size: int, val_blocks: int, seed: int):
        n, b = len(data), batch_size
        n_blocks = n // b
        if n_blocks < 2:
            raise InputError(
                f"the corpus has {n:,} sentences; training needs at least 2 × batch size "
                f"({2 * b:,}): one batch to train on and one to validate. Use a larger corpus "
                "or a smaller --batch-size")
        self.data, self.batch_size, self.seed = data, batch_size, seed
        n_val = min(val_blocks, max(1, n_blocks // 20))
        self.val_blocks = np.unique(
            np.linspace(0, n_blocks - 1, n_val + 2)[1:-1].round().astype(int))
        self.train_blocks = np.setdiff1d(np.arange(n_blocks), self.val_blocks)
        self.steps_per_epoch = len(self.train_blocks)

    @classmethod
    def tokenise(cls, corpus: list[str], cache: Path, split: bool, vocab_size: int,
                 max_len: int, batch_size: int, val_blocks: int, seed: int,
                 display: Reporter) -> Blocks:
        """Tokenise `corpus` into `cache` (reused when already there) under a progress bar."""
        with display.stage("tokenising") as bar:
            data = TokenCorpus.build(corpus, cache, split, vocab_size, max_len,
                                     progress=lambda n: bar.update(n, f"{n:,} sentences"))
            return cls(data, batch_size, val_blocks, seed)  # errors clear the bar

    def block_at(self, k: int) -> int:
        """The block of training batch `k` (0-based): a fixed function of seed and k."""
        epoch, pos = divmod(k, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(self.train_blocks)
        return int(order[pos])

    def batch(self, block: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
        """(ids [B, T], lengths [B], document ids [B]) of a block, on `device`."""
        b = self.batch_size
        ids, lengths, docs = self.data.batch(block * b, (block + 1) * b)
        return ids.to(device), lengths.to(device), docs.to(device)

    def train_word_counts(self) -> np.ndarray:
        """How often each vocabulary id occurs in the training blocks (validation left out)."""
        b, data = self.batch_size, self.data
        counts = np.zeros(len(data.vocab), dtype=np.int64)
        for block in self.train_blocks:
            lo, hi = data.offsets[block * b], data.offsets[(block + 1) * b]
            counts += np.bincount(data.ids[lo:hi], minlength=len(counts))
        return counts

    def facts(self) -> dict[str, object]:
        """What identifies the data (checked on --resume, kept in config.json)."""
        return {"corpus_signature": self.data.meta["signature"],
                "corpus_sentences": len(self.data)}


class CorpusTask:
    """An objective over the blocks (see `loop.Task`): QT, FastSent or the SDAE."""

    def __init__(self, name: str, blocks: Blocks, objective: Objective, runtime: Runtime,
                 metric: str, baseline: str, heads: dict[str, nn.Module] | None = None):
        self.name, self.blocks, self.objective, self.rt = name, blocks, objective, runtime
        self.metric, self.baseline = metric, baseline
        self._heads = heads or {}
        self.steps_per_epoch = blocks.steps_per_epoch
        self.sentences_per_batch = blocks.batch_size

    def heads(self) -> dict[str, nn.Module]:
        return self._heads

    def stats(self, block: int, noise_seed: list[int]) -> BatchStats:
        """The objective on one block; `noise_seed` fixes any random noise (SDAE)."""
        ids, lengths, docs = self.blocks.batch(block, self.rt.device)
        with self.rt.autocast():
            return self.objective(ids, lengths, docs, np.random.default_rng(noise_seed))

    def batch_loss(self, k: int) -> BatchStats:
        return self.stats(self.blocks.block_at(k), [self.blocks.seed, k, 0])

    def validate(self) -> tuple[float, float, float]:
        # the same noise at every validation, so the figure is comparable along the run
        seed = self.blocks.seed
        return pooled(self.stats(int(b), [seed, int(b), 1]) for b in self.blocks.val_blocks)
