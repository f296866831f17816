"""Encoding a few sentences on the CPU without torch's per-operation overhead.

A query is one sentence, read by every GRU of the model: 2 for uni (f and g), 4 for bi, 8 for
MC-QT (f and g × frozen and trainable words × two directions). Through `nn.GRU` that is 8 calls
whose timesteps are each a handful of tiny operations at ~20 µs of torch dispatch apiece: one
14-token query through the shipped MC-QT model took 5.6 ms on this CPU, almost all of it
overhead. Here the weights are prepared once; the input projections of all GRUs that read the
same word table are one BLAS matmul, and the recurrences run in one compiled loop (numba) that
finishes one GRU before starting the next, so that GRU's recurrent weights (270 KB at H=150)
stay in the core's L2 cache for all its steps. Stepping all eight GRUs together with numpy
instead streamed their 2.2 MB of weights from L3 at every step: 3.6 ms for a 33-token query,
against ~1 ms here.

Same maths as `nn.GRU` (gates r, z, n) in fp32: vectors equal the torch path to float
rounding (tests/test_fused.py). Used for small fp32 batches on the CPU only; large batches
(index builds) keep torch, which wins there with bf16 and big matmuls.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from threadpoolctl import ThreadpoolController
from torch import nn

from qtsearch.models.stacked import StackedGRUs

#: numpy's BLAS is held to one thread around the small input-projection matmuls: its threads
#: spinning up for them made a query up to 10x slower on 2 busy cores.
_BLAS = ThreadpoolController()
_helper: ThreadPoolExecutor | None = None


def _second_thread() -> ThreadPoolExecutor | None:
    """A thread for half of the GRUs (the compiled loop runs without the GIL), where there is a
    second core; one per process: a forked child does not have its parent's thread."""
    global _helper
    if _helper is None and (os.cpu_count() or 1) > 1:
        _helper = ThreadPoolExecutor(1, "qtsearch-gru")
    return _helper


def _forget_second_thread() -> None:
    global _helper
    _helper = None


os.register_at_fork(after_in_child=_forget_second_thread)


# exp(x) = 2^n · exp(r) with r = x − n·ln 2 in [−ln2/2, ln2/2] (ln 2 split in a short high part
# and a correction, so n·ln2_hi is exact), exp(r) by its Taylor series to r^7 (relative error
# < 1e-8 there) and 2^n from a table: plain float32 arithmetic that the compiler vectorises,
# where a call to the C library's expf per gate would cost ~10 ns and stay scalar.
_F = np.float32
_LOG2E, _LN2_HI, _LN2_LO = _F(1.4426950408889634), _F(0.693359375), _F(-2.1219444005469057e-4)
_TAYLOR = tuple(_F(1.0 / math.factorial(i)) for i in range(8))
_POW2 = np.array([2.0**n for n in range(-126, 128)], dtype=np.float32)  # 2^n at n + 126
_ONE, _TWO, _HALF, _LO, _HI = _F(1.0), _F(2.0), _F(0.5), _F(-87.0), _F(88.0)


@numba.njit(inline="always")
def _exp(x):  # pragma: no cover - compiled
    x = min(max(x, _LO), _HI)
    n = np.floor(x * _LOG2E + _HALF)
    r = x - n * _LN2_HI - n * _LN2_LO
    c = _TAYLOR
    p = c[0] + r * (c[1] + r * (c[2] + r * (c[3] + r * (c[4] + r * (c[5] + r * (c[6]
                                                                   + r * c[7]))))))
    return p * _POW2[np.uint32(np.int32(n) + 126)]  # unsigned: no negative-index branch


# error_model="numpy": no zero-division branch per gate, which kept the loops scalar (4x slower);
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
    rz = np.empty(2 * hidden, np.float32)
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
                # gh loaded and stored once per eight rows (1.35x faster than one by one)
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
                for j in range(2 * hidden):  # r and z = sigmoid
                    rz[j] = _ONE / (_ONE + _exp(-(x[j] + gh[j])))
                for j in range(hidden):
                    a = x[2 * hidden + j] + rz[j] * gh[2 * hidden + j]
                    n = _TWO / (_ONE + _exp(-_TWO * a)) - _ONE  # tanh(a)
                    h[j] = n + rz[hidden + j] * (h[j] - n)  # (1 - z) * n + z * h
            out[b, g * hidden : (g + 1) * hidden] = h


class WordProjections:
    """x·W_ih + b_ih of the words of one table for all the GRUs that read it, each word's row
    computed the first time a query uses it and kept.

    A GRU's input projection depends on the word alone, so a query only gathers rows: for a
    33-token query the two MC-QT tables' projections cost ~1.1 ms of BLAS, a gather ~10 µs.
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
            with _BLAS.limit(limits=1, user_api="blas"):
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
        n_gru, helper = len(self.w_hh), _second_thread()
        if helper is None or n_gru < 2:
            _final_states(*args, 0, n_gru)
            return out
        # the GRUs are independent: half of them on a second core (1.1 → 0.6 ms per query)
        half = n_gru // 2
        other = helper.submit(_final_states, *args, half, n_gru)
        _final_states(*args, 0, half)
        other.result()
        return out
