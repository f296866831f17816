"""Encoding large batches on the CPU: every GRU of a model stepped together.

Through `nn.GRU` the shipped MC-QT model is eight separate GRU calls per batch, each computing
its input projection as a matmul over all tokens (a third of the time) and then stepping alone
through small per-step matmuls and a string of elementwise operations. Here the input
projections are a lookup in a per-word table computed once (`StackedGRUs`: they depend on the
word alone; the r and z recurrent biases are folded in), and each timestep of a group of GRUs is
one batched matmul (torch: oneDNN's bf16 kernels) and one compiled pass (numba) that gathers
the table rows and applies the gates, writing the new state in float32 and, for the next
matmul, in its precision. Torch ran those gates as six bf16 operations each reading and writing
the whole [GRUs, rows, 3H] block; they took two thirds of the step.

Rows are sorted by length so that the rows still reading at step t are a prefix of the batch:
finished rows drop out of the work and keep their final state. The GRUs are split into one
group per core, each stepped by its own thread with one torch thread, so the cores never wait
for each other within a step. On 2 cores with bf16 this embedded ~3x as many sentences per
second as the `nn.GRU` path, with vectors within cosine 0.9999 of it (tests/test_stepped.py).

Inference only (no autograd), CPU only: on a GPU, cuDNN's GRU runs a whole batch per call.
"""

from __future__ import annotations

import os
from itertools import pairwise

import numba
import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.models.compiled import gru_unit, helpers, prefetch_row, store, widen
from qtsearch.models.encoders import reverse_within_length
from qtsearch.models.stacked import StackedGRUs

#: Largest projection table built (bf16: vocabulary × GRUs × 3H × 2 bytes; 144 MB for the
#: shipped model). Bigger models (a 50k vocabulary at H=1000) keep `nn.GRU`, whose own
#: matmuls are large and efficient there.
MAX_TABLE_BYTES = 1 << 30
#: Table rows requested this many rows ahead of their use: they are scattered over the table,
#: and waiting for each in turn cost ~20% of the gate pass.
_AHEAD = 6


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=True)
def _advance(gh, table, b_hn, rows, h, h_mm):  # pragma: no cover - compiled
    """One timestep of a group of GRUs over the first rows of a batch.

    gh [G, n, 3H] = h_mm · W_hh (torch's matmul); rows [G, n]: the table row each GRU reads
    at this step; table [ΣV, 3H]: input projections with the r and z recurrent biases;
    b_hn [G, H]; h [G, B, H] float32 states, updated in place, and h_mm [G, B, H] the same
    states in the matmul's precision (bf16 as uint16 bits, or float32).
    """
    n_gru, n_rows = rows.shape
    hidden = h.shape[2]
    for g in range(n_gru):
        for b in range(min(_AHEAD, n_rows)):
            prefetch_row(table, rows[g, b])
        for b in range(n_rows):
            if b + _AHEAD < n_rows:
                prefetch_row(table, rows[g, b + _AHEAD])
            x, m, state, out = table[rows[g, b]], gh[g, b], h[g, b], h_mm[g, b]
            for j in range(hidden):
                v = gru_unit(widen(x[j]) + widen(m[j]),
                             widen(x[hidden + j]) + widen(m[hidden + j]),
                             widen(x[2 * hidden + j]), widen(m[2 * hidden + j]) + b_hn[g, j],
                             state[j])
                state[j] = v
                store(out, j, v)


def _numpy(t: Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor; bf16 as its uint16 bits (numpy has no bf16)."""
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


class SteppedEncoder:
    """[f(s); g(s)] for batches of token ids, equal to `QuickThoughts.embed` up to rounding."""

    def __init__(self, stack: StackedGRUs, dtype: torch.dtype):
        h = stack.hidden
        sizes = [len(t.words) for t in stack.tables for _ in range(t.w_ih.shape[1] // (3 * h))]
        self.table = torch.empty(sum(sizes), 3 * h, dtype=dtype)  # [Σ V, 3H], GRU by GRU
        self.offsets = torch.tensor([0, *sizes[:-1]]).cumsum(0)[:, None, None]
        with torch.no_grad():
            g = 0
            for table in stack.tables:
                rows = table.projections(torch.arange(len(table.words)))
                for x in rows.view(len(table.words), -1, 3 * h).unbind(1):
                    start = int(self.offsets[g])
                    block = self.table[start : start + len(x)]
                    block[:, : 2 * h] = x[:, : 2 * h] + stack.b_hh[g, : 2 * h]
                    block[:, 2 * h :] = x[:, 2 * h :]
                    g += 1
        self.w_hh = stack.w_hh.to(dtype)  # [G, H, 3H]
        self.b_hn = stack.b_hh[:, 2 * h :].numpy().copy()  # [G, H]
        self.reverse = torch.tensor(stack.reverse)[:, None, None]
        self.hidden = h
        self.dtype = dtype

    @classmethod
    def for_model(cls, model: nn.Module, dtype: torch.dtype) -> SteppedEncoder | None:
        """An encoder for QT models of GRU or MC-QT encoders whose table fits, else None."""
        stack = StackedGRUs.of(model)
        if stack is None:
            return None
        rows = sum(len(t.words) * t.w_ih.shape[1] for t in stack.tables)
        if rows * torch.finfo(dtype).bits // 8 > MAX_TABLE_BYTES:
            return None
        return cls(stack, dtype)

    @torch.inference_mode()
    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Vectors [B, G·H] (float32) of right-padded token ids [B, T] with lengths [B]."""
        order = torch.argsort(lengths, descending=True)
        ids, lengths = ids[order], lengths[order]
        steps, n_gru = int(lengths[0]), len(self.w_hh)
        backward = reverse_within_length(ids[:, :steps, None], lengths)[..., 0]
        # row of the table each GRU reads at each step: [T, G, B]
        rows = torch.where(self.reverse, backward[None], ids[None, :, :steps]) + self.offsets
        rows = rows.permute(2, 0, 1).contiguous().numpy()
        reading = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1).tolist()
        h = np.zeros((n_gru, len(ids), self.hidden), dtype=np.float32)
        h_mm = torch.zeros(n_gru, len(ids), self.hidden, dtype=self.dtype)
        table, h_bits = _numpy(self.table), _numpy(h_mm)

        def run(first: int, last: int, one_thread: bool) -> None:
            if one_thread:
                torch.set_num_threads(1)  # per OS thread under OpenMP
            w, b_hn = self.w_hh[first:last], self.b_hn[first:last]
            for t, n in enumerate(reading):
                gh = _numpy(torch.bmm(h_mm[first:last, :n], w))
                _advance(gh, table, b_hn, rows[t, first:last, :n], h[first:last],
                         h_bits[first:last])

        threads = torch.get_num_threads()
        cores = min(n_gru, threads, os.cpu_count() or 1)
        if cores == 1:
            run(0, n_gru, one_thread=False)
        else:  # a group of GRUs per core; helpers() has a thread for each core but this one
            first, *rest = pairwise(round(i * n_gru / cores) for i in range(cores + 1))
            try:
                others = [helpers().submit(run, a, b, True) for a, b in rest]
                run(*first, one_thread=True)
                for job in others:
                    job.result()
            finally:
                torch.set_num_threads(threads)
        out = torch.empty(len(ids), n_gru * self.hidden)
        out[order] = torch.from_numpy(h).permute(1, 0, 2).reshape(len(ids), -1)
        return out
