"""The mean-of-words encoder: a sentence vector is the mean of its words' trainable vectors.

It is the fast end of the trained encoders (a table lookup and a mean: no recurrence), and it
is made good by where it starts and what trains it: its table starts from pretrained word
vectors (`--word-vectors model2vec`: MiniLM's knowledge of words, distilled) and the trainers of
sentence pairs (`train-pairs`, `train-nli`, `train-multitask`) then tune every row against
paraphrases, NLI, Quick-Thoughts neighbours and MiniLM's sentence vectors. It has the
interface of `InferSent` (`cfg`, `dim`, `embed`, `set_frozen_vectors`), so every trainer and
`load_encoder` take it by `--encoder mean`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qtsearch.models.encoders import EncoderConfig


class MeanWords(nn.Module):
    """Mean of trainable word vectors (`glove_dim` wide: the width of the pretrained ones)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.encoder != "mean":
            raise ValueError(f"a mean-of-words model's encoder is 'mean', not {cfg.encoder!r}")
        self.cfg = cfg
        self.words = nn.Embedding(cfg.vocab_size, cfg.glove_dim, padding_idx=0)
        self.dim = cfg.glove_dim

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        summed = self.words(ids[:, : int(lengths.max())]).sum(dim=1)  # the padding row is zero
        return summed / lengths[:, None].to(summed.dtype)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.forward(ids, lengths)

    def set_frozen_vectors(self, matrix: Tensor) -> None:
        """Start the table from pretrained vectors (named as InferSent's, whose table stays
        frozen: here every row trains)."""
        with torch.no_grad():
            self.words.weight.copy_(matrix)
            self.words.weight[0].zero_()
