"""The GRUs of a Quick-Thoughts model laid out for inference outside `nn.GRU`.

Both fast inference paths, `fused` (a few queries: numpy + a compiled loop) and `stepped`
(large batches on the CPU: torch), read a QT model of GRU or MC-QT encoders the same way: every
GRU (f and g × word table × direction) in the order the model concatenates its final states,
its recurrent weights stacked, and per word table the input weights of the GRUs that read it.
A GRU's input projection x·W_ih + b_ih depends on the word alone, so both paths look it up per
word rather than computing it for every token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from qtsearch.encoders.nn.quick_thoughts import GRUEncoder, MCEncoder, QuickThoughts, RNNReader


@dataclass
class WordTable:
    """One word-vector table and the input weights of the n GRUs that read it, side by side."""

    words: Tensor  # [V, in]
    w_ih: Tensor  # [in, n·3H]
    b_ih: Tensor  # [n·3H]

    def projections(self, ids: Tensor) -> Tensor:
        """x·W_ih + b_ih [*ids.shape, n·3H] of token ids, for each GRU reading this table."""
        return self.words[ids] @ self.w_ih + self.b_ih


@dataclass
class StackedGRUs:
    """All GRUs of a model, fp32 on the CPU, detached from autograd."""

    tables: list[WordTable]
    w_hh: Tensor  # [G, H, 3H]
    b_hh: Tensor  # [G, 3H]
    reverse: list[bool]  # per GRU: reads each sentence from its last token

    @property
    def hidden(self) -> int:
        return self.w_hh.shape[1]

    @property
    def dim(self) -> int:
        """Length of the sentence vector: every GRU's final state, concatenated."""
        return self.w_hh.shape[0] * self.hidden

    @classmethod
    def of(cls, model: nn.Module) -> StackedGRUs | None:
        """The stack of a QT model made of GRU or MC-QT encoders, else None."""
        if not isinstance(model, QuickThoughts):
            return None
        readers = [_readers(e) for e in (model.f, model.g)]
        if any(r is None for r in readers):
            return None
        tables, w_hh, b_hh, reverse = [], [], [], []
        with torch.no_grad():
            for reader, table in (pair for r in readers for pair in r or []):
                grus = [(gru, rev) for gru, rev in ((reader.fwd, False), (reader.bwd, True))
                        if gru is not None]
                tables.append(WordTable(
                    _cpu(table.weight),
                    torch.cat([_cpu(gru.weight_ih_l0).T for gru, _ in grus], dim=1),
                    torch.cat([_cpu(gru.bias_ih_l0) for gru, _ in grus]),
                ))
                for gru, rev in grus:
                    w_hh.append(_cpu(gru.weight_hh_l0).T)
                    b_hh.append(_cpu(gru.bias_hh_l0))
                    reverse.append(rev)
        return cls(tables, torch.stack(w_hh).contiguous(), torch.stack(b_hh), reverse)


def _readers(encoder: nn.Module) -> list[tuple[RNNReader, nn.Embedding]] | None:
    """(reader, its word table) in the order the encoder concatenates their states."""
    if type(encoder) is GRUEncoder:
        return [(encoder.rnn, encoder.embed)]
    if type(encoder) is MCEncoder:
        return [(encoder.rnn_frozen, encoder.frozen), (encoder.rnn, encoder.embed)]
    return None


def _cpu(t: Tensor) -> Tensor:
    return t.detach().to("cpu", torch.float32)
