"""Encoding large batches on the CPU: every GRU of a model stepped together.

Through `nn.GRU` the shipped MC-QT model is eight separate GRU calls per batch, each computing
its input projection as a matmul over all tokens (a third of the time) and then stepping alone
through small per-step matmuls. Here the input projections are a lookup in a per-word table
computed once (`StackedGRUs`: they depend on the word alone, and the recurrent biases are
folded in), and each timestep is one gather, one batched matmul over all eight GRUs and four
elementwise operations. Rows are sorted by length so that the rows still reading at step t are
a prefix of the batch: finished rows drop out of the work and keep their final state. On 2
cores with bf16 this embedded about twice as many sentences per second as the `nn.GRU` path,
with vectors within cosine 0.9999 of it (tests/test_stepped.py).

Inference only (no autograd), CPU only: on a GPU, cuDNN's GRU runs a whole batch per call.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from qtsearch.models.encoders import reverse_within_length
from qtsearch.models.stacked import StackedGRUs

#: Largest projection table built (bf16: vocabulary × GRUs × 4H × 2 bytes; 192 MB for the
#: shipped model). Bigger models (a 50k vocabulary at H=1000) keep `nn.GRU`, whose own
#: matmuls are large and efficient there.
MAX_TABLE_BYTES = 1 << 30


class SteppedEncoder:
    """[f(s); g(s)] for batches of token ids, equal to `QuickThoughts.embed` up to rounding."""

    def __init__(self, stack: StackedGRUs, dtype: torch.dtype):
        h = stack.hidden
        # Per GRU and word: [x_r + b_hr, −(x_z + b_hz), b_hn, x_n] (x = x·W_ih + b_ih), so that
        # one baddbmm with the first 3H as its input gives the r pre-activation, minus the z
        # one, and W_hn·h + b_hn; sigmoid then yields r and 1 − z, and 1 − z is the weight
        # that lerp_ needs to update the state in place: six operations a step, no copy.
        flip = torch.cat([torch.ones(h), -torch.ones(h), torch.ones(h)])
        sizes = [len(t.words) for t in stack.tables for _ in range(t.w_ih.shape[1] // (3 * h))]
        self.table = torch.empty(sum(sizes), 4 * h, dtype=dtype)  # [Σ V, 4H], GRU by GRU
        self.offsets = torch.tensor([0, *sizes[:-1]]).cumsum(0)[:, None, None]
        with torch.no_grad():
            g = 0
            for table in stack.tables:
                rows = table.projections(torch.arange(len(table.words)))
                for x in rows.view(len(table.words), -1, 3 * h).unbind(1):
                    start, b_hh = int(self.offsets[g]), stack.b_hh[g]
                    block = self.table[start : start + len(x)]
                    block[:, : 2 * h] = (x[:, : 2 * h] + b_hh[: 2 * h]) * flip[: 2 * h]
                    block[:, 2 * h : 3 * h] = b_hh[2 * h :]
                    block[:, 3 * h :] = x[:, 2 * h :]
                    g += 1
            self.w_hh = (stack.w_hh * flip).to(dtype)  # z columns negated
        self.reverse = torch.tensor(stack.reverse)[:, None, None]
        self.hidden = h
        self.dtype = dtype

    @classmethod
    def for_model(cls, model: nn.Module, dtype: torch.dtype) -> SteppedEncoder | None:
        """An encoder for QT models of GRU or MC-QT encoders whose table fits, else None."""
        stack = StackedGRUs.of(model)
        if stack is None:
            return None
        rows = sum(len(t.words) * t.w_ih.shape[1] * 4 // 3 for t in stack.tables)
        if rows * torch.finfo(dtype).bits // 8 > MAX_TABLE_BYTES:
            return None
        return cls(stack, dtype)

    @torch.inference_mode()
    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Vectors [B, G·H] (float32) of right-padded token ids [B, T] with lengths [B]."""
        order = torch.argsort(lengths, descending=True)
        ids, lengths = ids[order], lengths[order]
        h_size, steps = self.hidden, int(lengths[0])
        backward = reverse_within_length(ids[:, :steps, None], lengths)[..., 0]
        # row of the table each GRU reads at each step: [T, G, B]
        rows = torch.where(self.reverse, backward[None], ids[None, :, :steps]) + self.offsets
        rows = rows.permute(2, 0, 1)
        reading = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1).tolist()
        h = torch.zeros(len(self.w_hh), len(ids), h_size, dtype=self.dtype)
        for t, n in enumerate(reading):
            x = self.table.index_select(0, rows[t, :, :n].reshape(-1)).view(-1, n, 4 * h_size)
            prev = h[:, :n]
            gh = torch.baddbmm(x[..., : 3 * h_size], prev, self.w_hh)
            gates = gh[..., : 2 * h_size].sigmoid_()  # r, 1 − z
            cand = torch.addcmul(x[..., 3 * h_size :], gates[..., :h_size], gh[..., 2 * h_size :])
            prev.lerp_(cand.tanh_(), gates[..., h_size:])  # z·h + (1 − z)·n, in place
        out = torch.empty(len(ids), h.shape[0] * h_size)
        out[order] = h.permute(1, 0, 2).reshape(len(ids), -1).float()
        return out
