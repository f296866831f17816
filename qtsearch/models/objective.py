"""The Quick-Thoughts objective over a batch of contiguous sentences.

scores[i, j] = f(s_i)·g(s_j), the diagonal masked to −inf; the target distribution of row i is
uniform over its neighbours within the context window that lie in the same document; rows with
no neighbour (a one-sentence document) are left out of the loss and of the accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def neighbour_mask(docs: Tensor, context: int) -> Tensor:
    """[B, B] bool: j is a context neighbour of i (|i−j| ≤ (context−1)/2, j ≠ i, same doc)."""
    if context < 3 or context % 2 == 0:
        raise ValueError("context must be an odd number ≥ 3 (3 = previous and next)")
    reach = (context - 1) // 2
    idx = torch.arange(docs.shape[0], device=docs.device)
    dist = (idx[None, :] - idx[:, None]).abs()
    return (dist >= 1) & (dist <= reach) & (docs[None, :] == docs[:, None])


@dataclass
class BatchStats:
    loss: Tensor  # mean over rows with neighbours (a graph-connected scalar)
    correct: int  # rows whose arg-max is a true neighbour
    rows: int  # rows with at least one neighbour
    chance: float  # sum over rows of P(random non-self pick is a neighbour)


def qt_loss(f: Tensor, g: Tensor, docs: Tensor, context: int = 3) -> BatchStats:
    """Softmax cross-entropy of every sentence against its neighbours among the batch.

    Always computed in fp32, also inside an autocast region: bf16 scores are too coarse.
    """
    with torch.autocast(f.device.type, enabled=False):
        return _qt_loss(f.float(), g.float(), docs, context)


def _qt_loss(f: Tensor, g: Tensor, docs: Tensor, context: int) -> BatchStats:
    scores = (f @ g.T).fill_diagonal_(float("-inf"))
    mask = neighbour_mask(docs, context)
    counts = mask.sum(dim=1)
    valid = counts > 0
    logp = torch.log_softmax(scores, dim=1)
    picked = torch.where(mask, logp, torch.zeros_like(logp)).sum(dim=1)
    per_row = -picked / counts.clamp(min=1)
    rows = int(valid.sum())
    loss = per_row[valid].mean() if rows else scores.new_zeros(())
    with torch.no_grad():
        best = scores.argmax(dim=1)
        hit = mask[torch.arange(len(best), device=best.device), best] & valid
        n = scores.shape[0]
        chance = float((counts[valid].float() / (n - 1)).sum()) if rows else 0.0
    return BatchStats(loss=loss, correct=int(hit.sum()), rows=rows, chance=chance)
