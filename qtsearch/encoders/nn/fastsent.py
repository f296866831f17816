"""FastSent (Hill, Cho and Korhonen 2016): a sentence is the sum of its word vectors, trained to
predict the words of the sentences around it.

Two tables: input vectors u (the sentence vector s = Σ u_w) and output vectors v; the words w of
each neighbour sentence (previous and next with --context 3, same document only) are predicted
by softmax(v_w · s + b_w) over the whole vocabulary. FastSent+AE also predicts the sentence's own
words. Padding and <unk> are never targets: <unk> stands for every rare word and says nothing.

The output bias b is not in the paper, whose word2vec-style training leaves word frequency to
negative sampling: with a full softmax and no bias, every sentence vector must also encode how
frequent each word is. The trainer starts b at the log unigram frequencies of the training
blocks (`set_word_frequencies`), so the loss starts at that of a frequency-only predictor and
the vectors are trained on what the sentence adds to it.

The sentence vector is the sum, as in the paper, not the mean: the sum is what the loss trains
(its length scales the logits), and cosine search, the index's metric, is blind to the
difference.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.objective import (
    BatchStats,
    ObjectiveOptions,
    neighbour_mask,
    word_prediction_stats,
)
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig, init_embedding

#: A target word counts as predicted when it is among this many of the model's likeliest words.
PREDICTED_WORDS = 10


def fastsent_loss(
    s: Tensor, out_weight: Tensor, out_bias: Tensor, ids: Tensor, docs: Tensor,
    context: int = 3, autoencode: bool = False,
) -> BatchStats:
    """Mean NLL over the target words of every (sentence, neighbour) pair of the batch.

    s: sentence vectors [B, D]; out_weight: output vectors [V, D] and out_bias [V]; ids: [B, T]
    padded with 0. Computed in fp32, also inside an autocast region: a bf16 softmax over V words
    is too coarse.
    """
    with torch.autocast(s.device.type, enabled=False):
        logits = s.float() @ out_weight.float().T + out_bias.float()
        logp = torch.log_softmax(logits, dim=1)
        pairs = neighbour_mask(docs, context)
        if autoencode:
            pairs |= torch.eye(len(docs), dtype=torch.bool, device=docs.device)
        src, tgt = pairs.nonzero(as_tuple=True)
        words = ids[tgt]  # [P, T]: the words each pair's source must predict
        real = words > 1  # neither <pad> (0) nor <unk> (1)
        rows = src[:, None].expand_as(words)[real]
        return word_prediction_stats(logp, rows, words[real], PREDICTED_WORDS)


class FastSent(nn.Module):
    metric = f"top-{PREDICTED_WORDS} target-word accuracy"
    baseline = f"the {PREDICTED_WORDS} most frequent words"

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.words = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        self.targets = nn.Embedding(cfg.vocab_size, cfg.word_dim)
        init_embedding(self.words)
        init_embedding(self.targets)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.dim = cfg.word_dim

    def set_word_frequencies(self, counts: Tensor) -> None:
        """Start the output bias at log P(word), add-one smoothed."""
        smoothed = counts.double() + 1
        self.bias.data.copy_((smoothed / smoothed.sum()).log())

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.words(ids).sum(dim=1)  # the padding row is zero

    def objective(
        self, ids: Tensor, lengths: Tensor, docs: Tensor, opts: ObjectiveOptions,
        rng: np.random.Generator,
    ) -> BatchStats:
        return fastsent_loss(
            self.embed(ids, lengths), self.targets.weight, self.bias, ids, docs, opts.context,
            opts.autoencode,
        )
