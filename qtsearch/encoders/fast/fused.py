"""Encoding a few sentences on the CPU without torch's per-operation overhead.

A query is one sentence, read by every GRU of the model: 2 for uni (f and g), 4 for bi, 8 for MC-QT
(f and g × frozen and trainable words × two directions). Through `nn.GRU` that is 8 calls whose
timesteps are each a handful of tiny operations, each paying torch's dispatch: for a query, almost
all of the time is overhead. Here the weights are prepared once; the input projections of all GRUs
that read the same word table are one BLAS matmul, and the recurrences run in one compiled loop
(numba) that finishes one GRU before starting the next, so that GRU's recurrent weights (270 KB at
H=150) stay in the core's L2 cache for all its steps. Stepping all eight GRUs together with numpy
instead streamed their 2.2 MB of weights from L3 at every step (the measurements:
docs/benchmarks.md, "Speed").

Same maths as `nn.GRU` (gates r, z, n) in fp32: vectors equal the torch path to float
rounding (tests/encoders/test_fused.py). Used for small fp32 batches on the CPU only; large batches
(index builds) go through `stepped`, whose batched bf16 matmuls win there. Both share the gate
arithmetic and helper threads of `compiled`.
"""

from __future__ import annotations

import os

import numba
import numpy as np
from torch import nn

from qtsearch.core.blas import ONE_BLAS_THREAD
from qtsearch.encoders.fast.compiled import gru_unit, helpers
from qtsearch.encoders.fast.stacked import StackedGRUs


# error_model="numpy": no zero-division branch per gate, which would keep the loops scalar;
# fastmath lets the compiler reorder the float sums (vectors still match torch to ~1e-6).
@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath=True)
def _final_states(gi, w_hh, b_hh, reverse, lengths, out, first, last):  # pragma: no cover
    """Run GRUs first..last-1 over every row; write their final states into `out`.

    gi [B, T, G·3H]: input projections (with b_ih) of the words in reading order; a backward
    GRU reads its row from the last real token down. w_hh [G, H, 3H], b_hh [G, 3H],
    reverse [G], lengths [B], out [B, G·H].
    """
    n_rows = gi.shape[0]
    _, hidden, width = w_hh.shape
    h = np.empty(hidden, np.float32)
    gh = np.empty(width, np.float32)
    by8 = hidden - hidden % 8
    for g in range(first, last):
        w = w_hh[g]
        at = g * width
        for b in range(n_rows):
            h[:] = 0.0
            steps = lengths[b]
            for s in range(steps):
                t = steps - 1 - s if reverse[g] else s
                x = gi[b, t, at : at + width]
                gh[:] = b_hh[g]
                # gh += h @ w, eight rows of w per pass over gh: contiguous and vectorised,
                # gh loaded and stored once per eight rows rather than once per row
                for k in range(0, by8, 8):
                    h0, h1, h2, h3 = h[k], h[k + 1], h[k + 2], h[k + 3]
                    h4, h5, h6, h7 = h[k + 4], h[k + 5], h[k + 6], h[k + 7]
                    for j in range(width):
                        gh[j] += (h0 * w[k, j] + h1 * w[k + 1, j] + h2 * w[k + 2, j]
                                  + h3 * w[k + 3, j]) + (h4 * w[k + 4, j] + h5 * w[k + 5, j]
                                                         + h6 * w[k + 6, j] + h7 * w[k + 7, j])
                for k in range(by8, hidden):
                    hk = h[k]
                    for j in range(width):
                        gh[j] += hk * w[k, j]
                for j in range(hidden):
                    h[j] = gru_unit(x[j] + gh[j], x[hidden + j] + gh[hidden + j],
                                    x[2 * hidden + j], gh[2 * hidden + j], h[j])
            out[b, g * hidden : (g + 1) * hidden] = h


class WordProjections:
    """x·W_ih + b_ih of the words of one table for all the GRUs that read it, each word's row
    computed the first time a query uses it and kept.

    A GRU's input projection depends on the word alone, so a query only gathers rows instead
    of computing its tokens' projections with BLAS, which cost most of a query's encoding.
    The table is reserved whole (vocabulary × 3H × GRUs floats: 144 MB for each half of the
    shipped model) but the OS backs only the rows written, so memory grows with the words
    queries actually use. Concurrent callers at worst compute a row twice, identically.
    """

    def __init__(self, words: np.ndarray, w_ih: np.ndarray, b_ih: np.ndarray):
        self.words, self.w_ih, self.b_ih = words, w_ih, b_ih
        self.rows = np.empty((len(words), w_ih.shape[1]), dtype=np.float32)
        self.known = np.zeros(len(words), dtype=bool)

    def of(self, ids: np.ndarray) -> np.ndarray:
        """Projections [*ids.shape, n·3H] of token ids."""
        self._compute(np.unique(ids[~self.known[ids]]))
        return self.rows[ids]

    def fill(self, chunk: int = 2048) -> None:
        """Every word's row now (a query server's warm-up), a chunk at a time."""
        for start in range(0, len(self.words), chunk):
            ids = np.arange(start, min(start + chunk, len(self.words)))
            self._compute(ids[~self.known[ids]])

    def _compute(self, new: np.ndarray) -> None:
        if len(new):
            with ONE_BLAS_THREAD:
                self.rows[new] = self.words[new] @ self.w_ih + self.b_ih
            self.known[new] = True


class SmallBatchEncoder:
    """[f(s); g(s)] for a few sentences with numpy and numba, equal to `QuickThoughts.embed`."""

    def __init__(self, stack: StackedGRUs):
        self.projections = [WordProjections(t.words.numpy(), t.w_ih.numpy(), t.b_ih.numpy())
                            for t in stack.tables]
        self.w_hh = stack.w_hh.numpy()  # [G, H, 3H]
        self.b_hh = stack.b_hh.numpy()  # [G, 3H]
        self.reverse = np.array(stack.reverse)
        self.dim = stack.dim

    @classmethod
    def for_model(cls, model: nn.Module) -> SmallBatchEncoder | None:
        """An encoder for QT models made of GRU or MC-QT encoders, else None."""
        stack = StackedGRUs.of(model)
        return None if stack is None else cls(stack)

    def warm_up(self) -> None:
        """Compute every word's input projections now rather than on first use."""
        for p in self.projections:
            p.fill()

    def embed(self, ids: list[list[int]]) -> np.ndarray:
        """Vectors [len(ids), dim] of token-id lists (each non-empty)."""
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        padded = np.zeros((len(ids), int(lengths.max())), dtype=np.int64)
        for r, x in enumerate(ids):
            padded[r, : len(x)] = x
        gi = np.concatenate([p.of(padded) for p in self.projections], axis=-1)
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        args = (gi, self.w_hh, self.b_hh, self.reverse, lengths, out)
        n_gru = len(self.w_hh)
        if (os.cpu_count() or 1) < 2 or n_gru < 2:
            _final_states(*args, 0, n_gru)
            return out
        # the GRUs are independent: half of them on a second core, halving a query's wait
        half = n_gru // 2
        other = helpers("queries").submit(_final_states, *args, half, n_gru)
        _final_states(*args, 0, half)
        other.result()
        return out
