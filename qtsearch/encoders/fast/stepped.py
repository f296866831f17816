"""Encoding large batches on the CPU: every GRU of a model stepped together.

Through `nn.GRU` the shipped MC-QT model is eight separate GRU calls per batch, each computing
its input projection as a matmul over all tokens (a third of the time) and then stepping alone
through small per-step matmuls and a string of elementwise operations. Here the input
projections are a lookup in a per-word table computed once (`StackedGRUs`: they depend on the
word alone; the r and z recurrent biases are folded in), and each timestep of a group of GRUs is
one batched matmul (torch: oneDNN's bf16 kernels) and one compiled pass (numba) that gathers
the table rows and applies the gates, writing the new state in float32 and, for the next
matmul, in its precision. Torch ran those gates as six bf16 operations each reading and writing
the whole [GRUs, rows, 3H] block, which dominated the step.

Rows are sorted by length so that the rows still reading at step t are a prefix of the batch:
finished rows drop out of the work and keep their final state. The work is split into one
share per core (groups of GRUs, and rows where cores outnumber GRUs), each stepped by its own
thread with one torch thread, so the cores never wait for each other within a step. With
bf16 this embeds several times as many sentences per second as the `nn.GRU` path
(docs/benchmarks.md, "Speed"), with vectors within cosine 0.9999 of it
(tests/encoders/test_stepped.py).

Inference only (no autograd), CPU only: on a GPU, cuDNN's GRU runs a whole batch per call.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from itertools import pairwise
from typing import TypeVar

import numba
import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.encoders.fast.compiled import gru_unit, helpers, prefetch_row, store, widen
from qtsearch.encoders.fast.stacked import StackedGRUs
from qtsearch.encoders.nn.quick_thoughts import reverse_within_length

#: Largest projection table built (bf16: vocabulary × GRUs × 3H × 2 bytes; 144 MB for the
#: shipped model). Bigger models (a 50k vocabulary at H=1000) keep `nn.GRU`, whose own
#: matmuls are large and efficient there.
MAX_TABLE_BYTES = 1 << 30
#: Table rows requested this many rows ahead of their use: they are scattered over the table,
#: and waiting for each in turn cost ~20% of the gate pass.
_AHEAD = 6
#: Batches handed to the helper threads ahead of the one the caller waits for.
_IN_FLIGHT = 2
T = TypeVar("T")


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=True)
def _advance(gh, table, b_hn, rows, h, h_mm):  # pragma: no cover - compiled
    """One timestep of a share of a batch: G GRUs over the first n of its rows still reading.

    gh [G, n, 3H] = h_mm · W_hh (torch's matmul); rows [G, n]: the table row each GRU reads
    at this step; table [ΣV, 3H]: input projections with the r and z recurrent biases;
    b_hn [G, H]; h [G, ≥n, H] float32 states of the share's rows, updated in place, and
    h_mm [G, ≥n, H] the same states in the matmul's precision (bf16 as uint16 bits, or
    float32).
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


def _shares(n_gru: int, n_rows: int, cores: int) -> list[tuple[int, int, int, int]]:
    """(first GRU, end, first row, end) of each core's share of a batch: groups of whole GRUs
    (each reads its own weights once a step for all rows); with more cores than GRUs (a
    uni-GRU model has two), each GRU's rows are split too, evenly, as the embedder's batches
    hold sentences of similar length."""
    groups = min(n_gru, cores)
    parts = max(1, min(cores // groups, n_rows))
    grus = [round(i * n_gru / groups) for i in range(groups + 1)]
    rows = [round(i * n_rows / parts) for i in range(parts + 1)]
    return [(a, b, lo, hi) for a, b in pairwise(grus) for lo, hi in pairwise(rows)]


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

    def embed(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """Vectors [B, G·H] (float32) of right-padded token ids [B, T] with lengths [B]."""
        return next(self.embed_all([(None, ids, lengths)]))[1]

    def embed_all(self, batches: Iterable[tuple[T, Tensor, Tensor]]) -> Iterator[tuple[T, Tensor]]:
        """(tag, vectors) for each (tag, ids, lengths) of `batches`, in order.

        Each batch is split into one share per core (`_shares`), and the shares of successive
        batches go to the helper threads as they free up (up to `_IN_FLIGHT` batches ahead):
        no core waits for a slower one or for the caller's work between batches (tokenising,
        writing), which a barrier per batch cost ~10% of the stage.
        """
        threads = torch.get_num_threads()
        cores = min(threads, os.cpu_count() or 1)
        pending: deque[tuple[T, _Batch, list[Future[None]]]] = deque()
        try:
            for tag, ids, lengths in batches:
                batch = _Batch(self, ids, lengths)
                if cores == 1:  # torch's own threads (if any) in this thread
                    batch.run(0, len(self.w_hh), 0, len(ids), one_thread=False)
                    yield tag, batch.vectors()
                    continue
                jobs = [helpers("batches").submit(batch.run, *share, True)
                        for share in _shares(len(self.w_hh), len(ids), cores)]
                pending.append((tag, batch, jobs))
                if len(pending) > _IN_FLIGHT:
                    yield self._finish(pending.popleft())
            while pending:
                yield self._finish(pending.popleft())
        finally:
            for _, _, jobs in pending:  # the caller stopped early
                for job in jobs:
                    job.cancel()
            torch.set_num_threads(threads)  # the helpers set one thread for themselves

    @staticmethod
    def _finish(item: tuple[T, _Batch, list[Future[None]]]) -> tuple[T, Tensor]:
        tag, batch, jobs = item
        for job in jobs:
            job.result()
        return tag, batch.vectors()


class _Batch:
    """One batch sorted by length, its table rows per step, and its states as they advance."""

    def __init__(self, encoder: SteppedEncoder, ids: Tensor, lengths: Tensor):
        self.encoder = encoder
        self.order = torch.argsort(lengths, descending=True)
        ids, lengths = ids[self.order], lengths[self.order]
        steps, n_gru = int(lengths[0]), len(encoder.w_hh)
        backward = reverse_within_length(ids[:, :steps, None], lengths)[..., 0]
        # row of the table each GRU reads at each step: [T, G, B]
        rows = torch.where(encoder.reverse, backward[None], ids[None, :, :steps])
        self.rows = (rows + encoder.offsets).permute(2, 0, 1).contiguous().numpy()
        self.reading = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1).tolist()
        self.h = np.zeros((n_gru, len(ids), encoder.hidden), dtype=np.float32)
        self.h_mm = torch.zeros(n_gru, len(ids), encoder.hidden, dtype=encoder.dtype)

    @torch.inference_mode()
    def run(self, first: int, last: int, lo: int, hi: int, one_thread: bool) -> None:
        """Step GRUs first..last-1 through rows lo..hi-1 of the batch."""
        if one_thread:
            torch.set_num_threads(1)  # for this OS thread (an OpenMP setting)
        enc = self.encoder
        table, w, b_hn = _numpy(enc.table), enc.w_hh[first:last], enc.b_hn[first:last]
        h, h_mm = self.h[first:last, lo:hi], self.h_mm[first:last, lo:hi]
        h_bits = _numpy(self.h_mm)[first:last, lo:hi]
        for t, reading in enumerate(self.reading):
            n = min(reading, hi) - lo  # rows are longest first: once none reads, none will
            if n <= 0:
                break
            gh = _numpy(torch.bmm(h_mm[:, :n], w))
            _advance(gh, table, b_hn, self.rows[t, first:last, lo : lo + n], h, h_bits)

    def vectors(self) -> Tensor:
        """[B, G·H] float32, rows in the batch's input order."""
        out = torch.empty(self.h.shape[1], self.h.shape[0] * self.h.shape[2])
        out[self.order] = torch.from_numpy(self.h).permute(1, 0, 2).reshape(len(out), -1)
        return out
