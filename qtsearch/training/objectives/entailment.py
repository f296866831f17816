"""NLI as a task for a sentence encoder (InferSent): classify [u, v, |u−v|, u*v] of a premise's
and a hypothesis's vectors as entailment, neutral or contradiction.

Validation is a separate file or, without one, a held-out share of the training *premises* with
all their pairs; training pairs that share a sentence with a validation pair are dropped, so no
validation sentence is ever trained on. Batches are drawn from a permutation fixed by
(seed, epoch), so a batch's number alone fixes its pairs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.infersent import NLIClassifier
from qtsearch.encoders.nn.objective import BatchStats
from qtsearch.text.datasets.nli_data import NLIPair
from qtsearch.text.datasets.paraphrase_data import hold_out
from qtsearch.text.vocab import Vocab
from qtsearch.training.loop import Runtime


def split_by_premise(
    pairs: Sequence[NLIPair], fraction: float, seed: int
) -> tuple[list[NLIPair], list[NLIPair]]:
    """(train, valid): a random `fraction` of the distinct premises, with all their pairs, held
    out; training pairs that share any sentence with a validation pair are dropped (SICK reuses
    sentences across pairs, in both roles)."""
    return hold_out(pairs, lambda p: p.premise, lambda p: (p.premise, p.hypothesis), fraction,
                    seed, "premises")


def pad_ids(rows: Sequence[Sequence[int]]) -> tuple[Tensor, Tensor]:
    """Right-padded ids [B, T] and lengths [B]."""
    lengths = [len(r) for r in rows]
    out = np.zeros((len(rows), max(lengths)), dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out), torch.tensor(lengths)


def rows_at(k: int, n_rows: int, batch_size: int, seed: int) -> np.ndarray:
    """The rows of batch `k` (0-based) of a set of `n_rows` shuffled per epoch: a fixed function
    of seed and k (a last partial batch of an epoch is never used)."""
    epoch, pos = divmod(k, max(1, n_rows // batch_size))
    order = np.random.default_rng([seed, epoch]).permutation(n_rows)
    return order[pos * batch_size : (pos + 1) * batch_size]


@dataclass
class NLISet:
    """Pairs as token ids: premises, hypotheses and labels, row-aligned."""

    premises: list[list[int]]
    hypotheses: list[list[int]]
    labels: np.ndarray

    @classmethod
    def encode(cls, pairs: Sequence[NLIPair], vocab: Vocab, max_len: int,
               tokens: Callable[[str], list[str]]) -> NLISet:
        return cls(
            [vocab.encode(tokens(p.premise), max_len) for p in pairs],
            [vocab.encode(tokens(p.hypothesis), max_len) for p in pairs],
            np.asarray([p.label for p in pairs], dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: Sequence[int], device: torch.device) -> tuple[Tensor, ...]:
        """(premise ids, lengths, hypothesis ids, lengths, labels) on `device`."""
        ip, lp = pad_ids([self.premises[i] for i in rows])
        ih, lh = pad_ids([self.hypotheses[i] for i in rows])
        y = torch.from_numpy(self.labels[np.asarray(rows)])
        return tuple(t.to(device) for t in (ip, lp, ih, lh, y))


class NLITask:
    """See `loop.Task`; the encoder is shared, the classifier is the task's head."""

    name = "nli"
    metric = "accuracy"
    baseline = "majority class"

    def __init__(self, train: NLISet, valid: NLISet, batch_size: int, seed: int,
                 encoder: nn.Module, head: NLIClassifier, runtime: Runtime):
        self.train, self.valid, self.seed = train, valid, seed
        self.encoder, self.head, self.rt = encoder, head, runtime
        self.batch_size = min(batch_size, len(train))
        self.steps_per_epoch = max(1, len(train) // self.batch_size)
        self.sentences_per_batch = 2 * self.batch_size
        counts = np.bincount(valid.labels, minlength=3)
        self.chance = float(counts.max() / counts.sum())  # the majority-class rate

    def heads(self) -> dict[str, nn.Module]:
        return {"nli": self.head}

    @staticmethod
    def loss(encoder: nn.Module, head: NLIClassifier, batch: Sequence[Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> tuple[Tensor, int]:
        """(mean cross-entropy in fp32, correct predictions) of one batch."""
        ip, lp, ih, lh, y = batch
        with autocast():
            logits = head(encoder(ip, lp), encoder(ih, lh))
        logits = logits.float()
        return nn.functional.cross_entropy(logits, y), int((logits.argmax(1) == y).sum())

    def batch_loss(self, k: int) -> BatchStats:
        rows = rows_at(k, len(self.train), self.batch_size, self.seed)
        loss, correct = self.loss(self.encoder, self.head,
                                  self.train.batch(rows, self.rt.device), self.rt.autocast)
        return BatchStats(loss, correct, len(rows), 0.0)

    def validate(self, batch_size: int = 256) -> tuple[float, float, float]:
        loss = correct = 0.0
        for s in range(0, len(self.valid), batch_size):
            rows = range(s, min(s + batch_size, len(self.valid)))
            st_loss, st_correct = self.loss(self.encoder, self.head,
                                            self.valid.batch(rows, self.rt.device),
                                            self.rt.autocast)
            loss += float(st_loss) * len(rows)
            correct += st_correct
        n = len(self.valid)
        return loss / n, correct / n, self.chance
