"""Paraphrase pairs as a task for a sentence encoder: in-batch contrastive learning
(`models.objective.pairs_loss`), the other positives of the batch (and any hard negatives) as
the candidates an anchor must not pick.

No head: the loss compares the shared encoder's own vectors by cosine, as search does.
Training batches are drawn from a permutation fixed by (seed, epoch); validation batches are
the first `val_batches` full batches of one fixed shuffle of the validation pairs (a file's
pairs come grouped by image or premise, and a batch of one image's captions would be all
paraphrases).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.objective import BatchStats, pairs_loss, pooled
from qtsearch.text.datasets.paraphrase_data import Pair
from qtsearch.text.vocab import Vocab
from qtsearch.training.loop import Runtime
from qtsearch.training.objectives.entailment import pad_ids, rows_at


@dataclass
class PairSet:
    """Pairs as token ids: anchors, positives and hard negatives (None: none), row-aligned."""

    anchors: Sequence[Sequence[int]]
    positives: Sequence[Sequence[int]]
    negatives: Sequence[Sequence[int] | None]

    @classmethod
    def encode(cls, pairs: Sequence[Pair], vocab: Vocab, max_len: int,
               tokens: Callable[[str], list[str]], negatives: bool = True) -> PairSet:
        def ids(s: str) -> list[int]:
            return vocab.encode(tokens(s), max_len)

        return cls([ids(p.anchor) for p in pairs], [ids(p.positive) for p in pairs],
                   [ids(p.negative) if negatives and p.negative else None for p in pairs])

    def __len__(self) -> int:
        return len(self.anchors)

    def batch(self, rows: Sequence[int], device: torch.device) -> tuple[Tensor, ...]:
        """(anchor ids, lengths, positive ids, lengths[, negative ids, lengths]) on `device`;
        the negatives only of the rows that have one, when any has."""
        parts = [pad_ids([self.anchors[i] for i in rows]),
                 pad_ids([self.positives[i] for i in rows])]
        negatives = [n for n in (self.negatives[i] for i in rows) if n is not None]
        if negatives:
            parts.append(pad_ids(negatives))
        return tuple(t.to(device) for part in parts for t in part)


class PairsTask:
    """See `loop.Task`."""

    metric = "in-batch retrieval accuracy"
    baseline = "chance"

    def __init__(self, train: PairSet, valid: PairSet, batch_size: int, seed: int,
                 encoder: nn.Module, scale: float, val_batches: int, runtime: Runtime,
                 name: str = "pairs"):
        # "pairs" for paraphrases, "qa" for questions and their answers: one loss, two tasks
        self.name = name
        self.train, self.valid, self.seed = train, valid, seed
        self.encoder, self.scale, self.rt = encoder, scale, runtime
        self.batch_size = min(batch_size, len(train))
        self.steps_per_epoch = max(1, len(train) // self.batch_size)
        self.sentences_per_batch = 2 * self.batch_size
        order = np.random.default_rng([seed, 2]).permutation(len(valid))
        size = min(batch_size, len(valid))
        starts = range(0, len(valid) - size + 1, size)
        self.valid_batches = [order[s : s + size] for s in starts][:val_batches]

    def heads(self) -> dict[str, nn.Module]:
        return {}

    def stats(self, pairs: PairSet, rows: Sequence[int]) -> BatchStats:
        batch = pairs.batch(rows, self.rt.device)
        with self.rt.autocast():
            vectors = [self.encoder(batch[i], batch[i + 1]) for i in range(0, len(batch), 2)]
        return pairs_loss(vectors[0], vectors[1], vectors[2] if len(vectors) > 2 else None,
                          self.scale)

    def batch_loss(self, k: int) -> BatchStats:
        return self.stats(self.train, rows_at(k, len(self.train), self.batch_size, self.seed))

    def validate(self) -> tuple[float, float, float]:
        return pooled(self.stats(self.valid, rows) for rows in self.valid_batches)
