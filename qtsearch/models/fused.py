"""Encoding a few sentences on the CPU without torch's per-operation overhead.

A query is one sentence, read by every GRU of the model: 2 for uni (f and g), 4 for bi, 8 for
MC-QT (f and g × frozen and trainable words × two directions). Through `nn.GRU` that is 8 calls
whose timesteps are each a handful of tiny operations at ~20 µs of torch dispatch apiece: one
14-token query through the shipped MC-QT model took 5.6 ms on this CPU, almost all of it
overhead. Here the weights are numpy arrays prepared once; every GRU's input projections are
computed for all steps at once and the recurrences of all GRUs advance together with one
batched matmul per step, so a query costs a few hundred microseconds.

Same maths as `nn.GRU` (gates r, z, n) in fp32: vectors equal the torch path to float
rounding (tests/test_fused.py). Used for small fp32 batches on the CPU only; large batches
(index builds) keep torch, which wins there with bf16 and big matmuls.
"""

from __future__ import annotations

import numpy as np
import torch
from threadpoolctl import ThreadpoolController
from torch import nn

from qtsearch.models.encoders import GRUEncoder, MCEncoder, QuickThoughts, RNNReader

#: Largest batch encoded here; above it torch's batched kernels are faster.
MAX_BATCH = 16
#: numpy's BLAS is held to one thread around these tiny matmuls: its threads spinning up for a
#: [8, 1, 150] x [8, 150, 450] product made a query 10x slower on 2 busy cores.
_BLAS = ThreadpoolController()


def _readers(encoder: nn.Module) -> list[tuple[RNNReader, nn.Embedding]] | None:
    """(reader, its word table) in the order the encoder concatenates their states."""
    if type(encoder) is GRUEncoder:
        return [(encoder.rnn, encoder.embed)]
    if type(encoder) is MCEncoder:
        return [(encoder.rnn_frozen, encoder.frozen), (encoder.rnn, encoder.embed)]
    return None


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float32).numpy().copy()


class SmallBatchEncoder:
    """[f(s); g(s)] for a few sentences with numpy, equal to `QuickThoughts.embed`."""

    def __init__(self, model: QuickThoughts):
        tables: dict[int, np.ndarray] = {}
        self.runs: list[tuple[np.ndarray, bool, np.ndarray, np.ndarray]] = []
        w_hh, b_hh = [], []
        for encoder in (model.f, model.g):
            readers = _readers(encoder)
            if readers is None:
                raise ValueError(f"no numpy path for {type(encoder).__name__}")
            for reader, table in readers:
                words = tables.setdefault(id(table), _np(table.weight))
                for gru, backward in ((reader.fwd, False), (reader.bwd, True)):
                    if gru is None:
                        continue
                    self.runs.append((words, backward, _np(gru.weight_ih_l0).T.copy(),
                                      _np(gru.bias_ih_l0)))
                    w_hh.append(_np(gru.weight_hh_l0).T)
                    b_hh.append(_np(gru.bias_hh_l0))
        self.w_hh = np.stack(w_hh)  # [G, H, 3H]
        self.b_hh = np.stack(b_hh)[:, None, :]  # [G, 1, 3H]
        self.hidden = self.w_hh.shape[1]

    @classmethod
    def for_model(cls, model: nn.Module) -> SmallBatchEncoder | None:
        """An encoder for QT models made of GRU or MC-QT encoders, else None."""
        if not isinstance(model, QuickThoughts):
            return None
        if any(_readers(e) is None for e in (model.f, model.g)):
            return None
        return cls(model)

    def embed(self, ids: list[list[int]]) -> np.ndarray:
        """Vectors [len(ids), dim] of token-id lists (each non-empty)."""
        with _BLAS.limit(limits=1, user_api="blas"):
            return self._embed(ids)

    def _embed(self, ids: list[list[int]]) -> np.ndarray:
        lengths = np.array([len(x) for x in ids])
        batch, steps, h = len(ids), int(lengths.max()), self.hidden
        padded = np.zeros((batch, steps), dtype=np.int64)
        backward = np.zeros((batch, steps), dtype=np.int64)  # each row reversed in its length
        for r, x in enumerate(ids):
            padded[r, : len(x)] = x
            backward[r, : len(x)] = x[::-1]
        gi = np.stack([(words[backward if rev else padded] @ w_ih) + b_ih
                       for words, rev, w_ih, b_ih in self.runs])  # [G, B, T, 3H]
        state = np.zeros((len(self.runs), batch, h), dtype=np.float32)
        alive = np.arange(steps)[:, None] < lengths[None, :]  # [T, B]
        for t in range(steps):
            gh = state @ self.w_hh + self.b_hh
            x = gi[:, :, t]
            r = 1.0 / (1.0 + np.exp(-(x[..., :h] + gh[..., :h])))
            z = 1.0 / (1.0 + np.exp(-(x[..., h:2 * h] + gh[..., h:2 * h])))
            n = np.tanh(x[..., 2 * h:] + r * gh[..., 2 * h:])
            new = n + z * (state - n)  # (1 - z) * n + z * h
            # A row past its last token keeps its state: the final one is read at length - 1.
            state = np.where(alive[t][None, :, None], new, state)
        return np.concatenate(list(state), axis=-1)
