"""Training objectives over a batch of contiguous sentences, and what they share.

Quick-Thoughts: scores[i, j] = f(s_i)·g(s_j), the diagonal masked to −inf; the target distribution
of row i is uniform over its neighbours within the context window that lie in the same document;
rows with no neighbour (a one-sentence document) are left out of the loss and of the accuracy.
FastSent and the SDAE (encoders/nn/fastsent.py, encoders/nn/sdae.py) predict words with a softmax
over the vocabulary and report through `word_prediction_stats`.
"""

from __future__ import annotations

from collections.abc import Iterable
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
class ObjectiveOptions:
    """Training options that shape the loss but not the model (kept out of EncoderConfig)."""

    context: int = 3  # QT and FastSent: 3 = previous and next sentence
    autoencode: bool = False  # FastSent+AE: also predict the sentence's own words
    word_dropout: float = 0.1  # SDAE noise p0
    swap_prob: float = 0.1  # SDAE noise px


@dataclass
class BatchStats:
    loss: Tensor  # mean over rows (a graph-connected scalar)
    correct: int  # QT: rows whose arg-max is a true neighbour; words: predicted target words
    rows: int  # QT: rows with at least one neighbour; words: target words
    chance: float  # sum over rows of the success probability of a baseline that ignores input


def pooled(stats: Iterable[BatchStats]) -> tuple[float, float, float]:
    """Loss, accuracy and chance over several batches, each weighted by its rows (validation)."""
    loss = correct = rows = chance = 0.0
    for st in stats:
        loss += float(st.loss) * st.rows
        correct += st.correct
        rows += st.rows
        chance += st.chance
    rows = max(rows, 1)
    return loss / rows, correct / rows, chance / rows


def word_prediction_stats(logp: Tensor, rows: Tensor, targets: Tensor, k: int) -> BatchStats:
    """Word `targets[n]` predicted by log-probability row `logp[rows[n]]` ([R, V], fp32).

    Loss: mean negative log-likelihood per target word. A hit: the target is among the row's k
    most likely words. The baseline always names the k most frequent words (ids 2 … k+1, since
    the vocabulary is sorted by frequency after <pad> and <unk>).
    """
    picked = logp[rows, targets]
    loss = -picked.mean() if len(targets) else logp.new_zeros(())
    with torch.no_grad():
        kth = logp.topk(k, dim=1).values[:, -1]
        correct = int((picked >= kth[rows]).sum())
        chance = float(((targets >= 2) & (targets < 2 + k)).sum())
    return BatchStats(loss=loss, correct=correct, rows=len(targets), chance=chance)


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


def pairs_loss(a: Tensor, p: Tensor, n: Tensor | None = None, scale: float = 20.0) -> BatchStats:
    """In-batch contrastive loss on paraphrase pairs: the Quick-Thoughts softmax with the
    positive given by the pair instead of the neighbour.

    Row i scores its anchor a_i against every positive of the batch and every hard negative
    (`n`, rows of their own) by cosine × `scale`; the target is its own positive p_i. The loss
    is symmetric: the mean of that cross-entropy and of each positive picking its anchor among
    the anchors. A hit: the anchor's best candidate is its positive; the input-blind baseline
    picks one of the candidates at random. Always fp32, also inside an autocast region.
    """
    with torch.autocast(a.device.type, enabled=False):
        unit = [torch.nn.functional.normalize(x.float(), dim=-1) for x in (a, p)]
        candidates = unit[1] if n is None or not len(n) else torch.cat(
            [unit[1], torch.nn.functional.normalize(n.float(), dim=-1)])
        scores = scale * unit[0] @ candidates.T
        target = torch.arange(len(a), device=a.device)
        ce = torch.nn.functional.cross_entropy
        loss = (ce(scores, target) + ce(scale * unit[1] @ unit[0].T, target)) / 2
    with torch.no_grad():
        correct = int((scores.argmax(dim=1) == target).sum())
    return BatchStats(loss=loss, correct=correct, rows=len(a),
                      chance=len(a) / candidates.shape[0])
