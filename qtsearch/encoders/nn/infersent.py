"""InferSent (Conneau et al. 2017): a BiLSTM with max pooling over frozen GloVe vectors, trained
on NLI through a classifier on [u, v, |u−v|, u*v].

The sentence vector is the max over time of the BiLSTM's states (2 × hidden); padding steps are
excluded from the max. The backward LSTM reads each row reversed within its own length, as the
QT GRUs do, so a padded batch gives the same vectors as sentences read one by one. Optional
trainable word embeddings are concatenated to the GloVe vectors (`word_dim` > 0).

`InferSent` has the interface of `QuickThoughts` that model folders and `load_encoder` use
(`cfg`, `dim`, `embed(ids, lengths)`, `set_frozen_vectors`); the NLI classifier is a separate
module, saved beside the weights, because encoding never needs it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.quick_thoughts import (
    EncoderConfig,
    init_embedding,
    read_in_length_groups,
    reverse_within_length,
)

N_CLASSES = 3


class BiLSTMMax(nn.Module):
    """Forward ⊕ backward LSTM states at every step, max-pooled over each row's real steps.

    Large batches of mixed lengths (QT's contiguous sentences) are read in groups of similar
    length, as the QT GRUs are."""

    group = 64

    def __init__(self, in_dim: int, hidden: int):
        super().__init__()
        self.fwd = nn.LSTM(in_dim, hidden, batch_first=True)
        self.bwd = nn.LSTM(in_dim, hidden, batch_first=True)
        self.out_dim = 2 * hidden

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        return read_in_length_groups(self._read, x, lengths, self.group)

    def _read(self, x: Tensor, lengths: Tensor) -> Tensor:
        hf = self.fwd(x)[0]
        hb = reverse_within_length(self.bwd(reverse_within_length(x, lengths))[0], lengths)
        states = torch.cat([hf, hb], dim=-1)
        pad = torch.arange(x.shape[1], device=x.device)[None, :] >= lengths[:, None]
        return states.masked_fill(pad[:, :, None], float("-inf")).max(dim=1).values


class InferSent(nn.Module):
    """Sentence encoder: frozen GloVe (⊕ trainable embeddings) → BiLSTM → max pooling."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        if cfg.encoder != "infersent":
            raise ValueError(f"an NLI model's encoder is 'infersent', not {cfg.encoder!r}")
        self.cfg = cfg
        self.frozen = nn.Embedding(cfg.vocab_size, cfg.glove_dim, padding_idx=0)
        self.frozen.weight.requires_grad_(False)
        self.words: nn.Embedding | None = None
        if cfg.word_dim > 0:
            self.words = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
            init_embedding(self.words)
        self.rnn = BiLSTMMax(cfg.glove_dim + max(cfg.word_dim, 0), cfg.hidden)
        self.dim = self.rnn.out_dim

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        x = self.frozen(ids)
        if self.words is not None:
            x = torch.cat([x, self.words(ids)], dim=-1)
        return self.rnn(x, lengths)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.forward(ids, lengths)

    def set_frozen_vectors(self, matrix: Tensor) -> None:
        self.frozen.weight.data.copy_(matrix)


def pair_features(u: Tensor, v: Tensor) -> Tensor:
    """InferSent's pair representation [u, v, |u − v|, u * v] (premise u, hypothesis v)."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)


class NLIClassifier(nn.Module):
    """An MLP with one hidden layer (the paper's 512 units) over `pair_features`."""

    def __init__(self, dim: int, fc_dim: int = 512, dropout: float = 0.0):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Dropout(dropout),
            nn.Linear(4 * dim, fc_dim),
            nn.Tanh(),
            nn.Dropout(dropout),
            nn.Linear(fc_dim, N_CLASSES),
        )

    def forward(self, u: Tensor, v: Tensor) -> Tensor:
        """Class logits [B, 3]."""
        return self.mlp(pair_features(u, v))
