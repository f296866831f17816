"""Sentence encoders: token ids [B, T] (right-padded with 0) and lengths [B] → vectors [B, D].

GRUs run on padded batches rather than packed sequences: on CPUs with bf16 support a padded
GRU under autocast is faster than a packed one (docs/training.md). The final
state is read at each row's last real token, and the backward direction of a bi-GRU reads each
row reversed within its own length, so padding never leaks into a sentence's vector.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.files import EncoderConfig  # its home is torch-free: model files
from qtsearch.encoders.nn.objective import BatchStats, ObjectiveOptions, qt_loss


def init_embedding(emb: nn.Embedding) -> None:
    """Paper initialisation: U(-0.1, 0.1), the padding row kept at zero."""
    nn.init.uniform_(emb.weight, -0.1, 0.1)
    with torch.no_grad():
        emb.weight[0].zero_()


def init_gru(gru: nn.GRU) -> None:
    """Paper initialisation: Xavier-uniform weights, reset/update gate biases 1, others 0."""
    h = gru.hidden_size
    for name, p in gru.named_parameters():
        if name.startswith("weight"):
            for k in range(3):  # each gate's block on its own, as TF's GRU cell does
                nn.init.xavier_uniform_(p.data[k * h : (k + 1) * h])
        elif name.startswith("bias_ih"):
            p.data.zero_()
            p.data[: 2 * h] = 1.0
        else:
            p.data.zero_()


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row's first `length` steps, leaving the padding where it is. x: [B, T, ...]."""
    t = torch.arange(x.shape[1], device=x.device)
    idx = lengths[:, None] - 1 - t[None, :]
    idx = torch.where(idx >= 0, idx, t[None, :])
    return x.gather(1, idx[:, :, None].expand(-1, -1, x.shape[2]))


def last_state(out: Tensor, lengths: Tensor) -> Tensor:
    return out[torch.arange(out.shape[0], device=out.device), lengths - 1]


#: Split a batch into length groups only when that removes at least this share of its padded
#: steps: one call over length-sorted rows embeds faster than several smaller calls (bigger
#: per-step matmuls; docs/benchmarks.md, "Speed"), so a batch the embedder already sorted by length
#: is read whole, while a training batch of contiguous sentences (lengths 1-50) is split.
MIN_PADDING_SAVED = 0.25


def read_in_length_groups(
    read: Callable[[Tensor, Tensor], Tensor], x: Tensor, lengths: Tensor, group: int
) -> Tensor:
    """`read(x, lengths)` over groups of `group` rows of similar length, each cut to its own
    longest row, results back in input order: far less padding than one batch-wide length
    when lengths are mixed (see MIN_PADDING_SAVED)."""
    longest = int(lengths.max())
    if x.shape[0] <= group:
        return read(x[:, :longest], lengths)
    order = torch.argsort(lengths, descending=True)
    groups = order.split(group)
    grouped = sum(len(rows) * int(lengths[rows[0]]) for rows in groups)
    if grouped > (1 - MIN_PADDING_SAVED) * x.shape[0] * longest:
        return read(x[:, :longest], lengths)
    parts = []
    for rows in groups:
        sub = lengths[rows]
        parts.append(read(x[rows, : int(sub.max())], sub))
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    return torch.cat(parts)[inverse]


class RNNReader(nn.Module):
    """A uni- or bi-directional GRU over word vectors that returns final states.

    A large batch of mixed lengths (a training batch of contiguous sentences) is read in groups
    of similar length (`read_in_length_groups`).
    """

    group = 128

    def __init__(self, in_dim: int, hidden: int, bidirectional: bool):
        super().__init__()
        self.fwd = nn.GRU(in_dim, hidden, batch_first=True)
        init_gru(self.fwd)
        self.bwd: nn.GRU | None = None
        if bidirectional:
            self.bwd = nn.GRU(in_dim, hidden, batch_first=True)
            init_gru(self.bwd)
        self.out_dim = hidden * (2 if bidirectional else 1)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        group = self.group if x.is_cpu else x.shape[0]  # a GPU steps all rows at once
        return read_in_length_groups(self._read, x, lengths, group)

    def _read(self, x: Tensor, lengths: Tensor) -> Tensor:
        h = last_state(self.fwd(x)[0], lengths)
        if self.bwd is None:
            return h
        hb = last_state(self.bwd(reverse_within_length(x, lengths))[0], lengths)
        return torch.cat([h, hb], dim=-1)


class GRUEncoder(nn.Module):
    """uni: final GRU state; bi: forward ⊕ backward final states."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        init_embedding(self.embed)
        self.rnn = RNNReader(cfg.word_dim, cfg.hidden, cfg.encoder == "bi")
        self.out_dim = self.rnn.out_dim

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return self.rnn(self.embed(ids), lengths)


class BowEncoder(nn.Module):
    """Mean of word embeddings."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        init_embedding(self.embed)
        self.out_dim = cfg.word_dim

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        summed = self.embed(ids).sum(dim=1)  # the padding row is zero
        return summed / lengths[:, None].to(summed.dtype)


class MCEncoder(nn.Module):
    """MC-QT: a bi-GRU over frozen GloVe vectors ⊕ a bi-GRU over trainable embeddings."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.frozen = nn.Embedding(cfg.vocab_size, cfg.glove_dim, padding_idx=0)
        self.frozen.weight.requires_grad_(False)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        init_embedding(self.embed)
        self.rnn_frozen = RNNReader(cfg.glove_dim, cfg.hidden, True)
        self.rnn = RNNReader(cfg.word_dim, cfg.hidden, True)
        self.out_dim = self.rnn_frozen.out_dim + self.rnn.out_dim

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        a = self.rnn_frozen(self.frozen(ids), lengths)
        b = self.rnn(self.embed(ids), lengths)
        return torch.cat([a, b], dim=-1)


class TransformerEncoder(nn.Module):
    """Pre-layer-norm Transformer (d_model = hidden, GELU, feed-forward 4 × d_model).

    Word vectors (projected to d_model when word_dim differs) plus learned positions; padded
    keys are masked out of attention and the sentence vector is the mean of the final layer over
    the real tokens: the vocabulary has no [CLS] token to pool from, and a mean is exactly
    independent of how much padding the batch adds. Read in groups of similar length like the GRUs.
    """

    group = 128

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        d = cfg.hidden
        self.embed = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
        init_embedding(self.embed)
        self.proj: nn.Module = nn.Linear(cfg.word_dim, d) if cfg.word_dim != d else nn.Identity()
        self.pos = nn.Parameter(torch.empty(cfg.max_len, d))
        nn.init.normal_(self.pos, std=0.02)
        self.drop = nn.Dropout(cfg.dropout)
        layer = nn.TransformerEncoderLayer(
            d, cfg.heads, 4 * d, cfg.dropout, activation="gelu", batch_first=True, norm_first=True
        )
        final = nn.LayerNorm(d)
        # the final norm's gain starts at d^-1/2: outputs of length ~1 like the GRUs' states,
        # so the first f·g scores are O(1) instead of O(d) and the softmax starts unsaturated
        nn.init.constant_(final.weight, d**-0.5)
        self.blocks = nn.TransformerEncoder(
            layer, cfg.layers, norm=final, enable_nested_tensor=False
        )
        self.out_dim = d

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return read_in_length_groups(self._read, ids, lengths, self.group)

    def _read(self, ids: Tensor, lengths: Tensor) -> Tensor:
        t = ids.shape[1]
        pad = torch.arange(t, device=ids.device)[None, :] >= lengths[:, None]
        x = self.drop(self.proj(self.embed(ids)) + self.pos[:t])
        h = self.blocks(x, src_key_padding_mask=pad)
        h = h.masked_fill(pad[:, :, None], 0.0)  # fast paths may leave anything at padding
        return h.sum(dim=1) / lengths[:, None].to(h.dtype)


# name → class built from an EncoderConfig; the class sets `out_dim`
ENCODERS: dict[str, type[nn.Module]] = {
    "uni": GRUEncoder,
    "bi": GRUEncoder,
    "bow": BowEncoder,
    "mc": MCEncoder,
    "transformer": TransformerEncoder,
}


def build_encoder(cfg: EncoderConfig) -> nn.Module:
    if cfg.encoder not in ENCODERS:
        raise ValueError(f"unknown encoder {cfg.encoder!r}; choose one of {', '.join(ENCODERS)}")
    return ENCODERS[cfg.encoder](cfg)


class QuickThoughts(nn.Module):
    """Two encoders f (the sentence) and g (its context); a sentence's vector is [f(s); g(s)]."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.f = build_encoder(cfg)
        self.g = build_encoder(cfg)
        self.dim = self.f.out_dim + self.g.out_dim

    metric = "context accuracy"
    baseline = "chance"

    def forward(self, ids: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        return self.f(ids, lengths), self.g(ids, lengths)

    def objective(
        self, ids: Tensor, lengths: Tensor, docs: Tensor, opts: ObjectiveOptions,
        rng: np.random.Generator,
    ) -> BatchStats:
        f, g = self(ids, lengths)
        return qt_loss(f, g, docs, opts.context)

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        return torch.cat(self.forward(ids, lengths), dim=-1)

    def set_frozen_vectors(self, matrix: Tensor) -> None:
        """MC-QT: copy the pretrained vectors into both encoders' frozen tables."""
        for enc in (self.f, self.g):
            enc.frozen.weight.data.copy_(matrix)
