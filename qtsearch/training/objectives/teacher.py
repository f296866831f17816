"""Distillation from a sentence-embedding teacher (all-MiniLM-L6-v2) as a task for the shared
encoder: the student's vector, through a linear projection head (the task's own, so the
encoder's width is free), should point where the teacher's vector points.

Loss: the squared distance between the L2-normalised projection and the L2-normalised teacher
vector (= 2 − 2·cosine), averaged over the batch, as in Reimers & Gurevych's multilingual
distillation (2020). It was chosen over matching in-batch similarity matrices because it gives
every sentence 384 targets rather than B−1 relative ones and needs no temperature; matching
every vector also fixes every pairwise cosine of the projections, which is the similarity
structure search uses. Teacher vectors come from the on-disk cache (training/teacher_cache).

Validation: a fixed held-out share of the teacher sentences. Its figure is in-batch retrieval:
a hit when a sentence's projection is closer to its own teacher vector than to the others of
its batch (chance 1/B). Training batches are drawn from a permutation fixed by (seed, epoch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.objective import BatchStats, pooled
from qtsearch.training.loop import Runtime
from qtsearch.training.objectives.entailment import pad_ids, rows_at


def teacher_loss(student: Tensor, teacher: Tensor) -> BatchStats:
    """Mean ‖ŝ − t̂‖² over the batch (hats: L2-normalised), fp32 also inside autocast; a hit:
    a row's nearest teacher vector of the batch (by cosine) is its own."""
    with torch.autocast(student.device.type, enabled=False):
        s = nn.functional.normalize(student.float(), dim=-1)
        t = nn.functional.normalize(teacher.float(), dim=-1)
        loss = (s - t).pow(2).sum(dim=-1).mean()
    with torch.no_grad():
        target = torch.arange(len(s), device=s.device)
        correct = int(((s @ t.T).argmax(dim=1) == target).sum())
    # the input-blind baseline picks one of the B candidates: 1/B per row, 1 per batch
    return BatchStats(loss=loss, correct=correct, rows=len(s), chance=1.0)


class TeacherTask:
    """See `loop.Task`; `head` projects the shared encoder's vectors to the teacher's width."""

    name = "teacher"
    metric = "in-batch retrieval of the teacher's vector"
    baseline = "chance"

    def __init__(self, ids: Sequence[Sequence[int]], vectors: np.ndarray, valid_rows: np.ndarray,
                 batch_size: int, seed: int, encoder: nn.Module, head: nn.Module,
                 runtime: Runtime):
        self.ids, self.vectors, self.seed = ids, vectors, seed
        self.encoder, self.head, self.rt = encoder, head, runtime
        self.train_rows = np.setdiff1d(np.arange(len(ids)), valid_rows)
        self.batch_size = min(batch_size, len(self.train_rows))
        self.steps_per_epoch = max(1, len(self.train_rows) // self.batch_size)
        self.sentences_per_batch = self.batch_size
        self.valid_batches = [valid_rows[s : s + self.batch_size]
                              for s in range(0, len(valid_rows) - self.batch_size + 1,
                                             self.batch_size)]

    def heads(self) -> dict[str, nn.Module]:
        return {"teacher": self.head}

    def stats(self, rows: np.ndarray) -> BatchStats:
        ids, lengths = pad_ids([self.ids[i] for i in rows])
        target = torch.from_numpy(self.vectors[rows].astype(np.float32)).to(self.rt.device)
        with self.rt.autocast():
            projected = self.head(self.encoder(ids.to(self.rt.device), lengths.to(self.rt.device)))
        return teacher_loss(projected, target)

    def batch_loss(self, k: int) -> BatchStats:
        pick = rows_at(k, len(self.train_rows), self.batch_size, self.seed)
        return self.stats(self.train_rows[pick])

    def validate(self) -> tuple[float, float, float]:
        return pooled(self.stats(rows) for rows in self.valid_batches)
