"""Compiled pieces shared by the two CPU inference paths (`fused` for queries, `stepped` for
batches): one GRU hidden unit's update in float32 arithmetic that the compiler vectorises,
bf16 ↔ float32 by bits (numpy has no bf16), and the process's helper threads.

Numba compiles these into the callers' loops (`inline="always"`); nothing here runs alone.
"""

from __future__ import annotations

import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def helpers(purpose: str) -> ThreadPoolExecutor:
    """Threads for the compiled loops' shares of the work (they run without the GIL), one per
    core, a pool per purpose ("queries", "batches"): a query's half never queues behind the
    GRU groups of batches in flight. Pools are per process: a child forked after work does
    not inherit its parent's threads, so it makes its own."""
    with _pools_lock:
        if purpose not in _pools:
            _pools[purpose] = ThreadPoolExecutor(os.cpu_count() or 1, f"qtsearch-{purpose}")
        return _pools[purpose]


def _forget_helpers() -> None:
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()  # one held by another thread at the fork stays held


os.register_at_fork(after_in_child=_forget_helpers)


@intrinsic
def _float_of_bits(typingctx, bits):
    """The float32 whose bit pattern is the uint32 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def _bits_of_float(typingctx, x):
    """The bit pattern (uint32) of the float32 `x`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@intrinsic
def prefetch_row(typingctx, matrix, row):
    """Ask the CPU to start loading row `row` of a C-contiguous matrix into its caches (every
    64-byte line of it), so that a gather of scattered rows overlaps their memory latency."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        item = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        size = builder.mul(builder.extract_value(array.shape, 1),
                           context.get_constant(types.intp, item))
        start = builder.add(
            builder.ptrtoint(array.data, cgutils.intp_t),
            builder.mul(context.cast(builder, args[1], signature.args[1], types.intp),
                        builder.extract_value(array.strides, 0)))
        fn = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [cgutils.voidptr_t] + [ir.IntType(32)] * 3),
            "llvm.prefetch.p0i8")
        read, keep, data = (ir.Constant(ir.IntType(32), v) for v in (0, 3, 1))
        with cgutils.for_range_slice(builder, context.get_constant(types.intp, 0), size,
                                     context.get_constant(types.intp, 64)) as (offset, _):
            line = builder.inttoptr(builder.add(start, offset), cgutils.voidptr_t)
            builder.call(fn, [line, read, keep, data])
        return context.get_dummy_value()
    return types.none(matrix, row), codegen


def widen(x):  # pragma: no cover - the compiled versions below
    """float32 of an array element: a bf16 kept as its uint16 bits, or a float32 itself."""
    raise NotImplementedError("compiled only")


@overload(widen, inline="always")
def _widen(x):
    if x == types.uint16:
        return lambda x: _float_of_bits(np.uint32(x) << np.uint32(16))
    if isinstance(x, types.Float):
        return lambda x: np.float32(x)
    return None


def store(out, j, v):  # pragma: no cover - the compiled versions below
    """out[j] = v for a float32 v: rounded to nearest even where `out` holds bf16 bits."""
    raise NotImplementedError("compiled only")


@overload(store, inline="always")
def _store(out, j, v):
    if out.dtype == types.uint16:
        def to_bf16(out, j, v):
            u = _bits_of_float(v)
            out[j] = np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
                               >> np.uint32(16))
        return to_bf16

    def as_is(out, j, v):
        out[j] = v
    return as_is


# exp(x) = 2^n · exp(r) with r = x − n·ln 2 in [−ln2/2, ln2/2] (ln 2 split in a short high part
# and a correction, so n·ln2_hi is exact), exp(r) by its Taylor series to r^7 (relative error
# < 1e-8 there) and 2^n built from its bits: plain float32 arithmetic that the compiler
# vectorises, where a call to the C library's expf per gate stays scalar (so does a table
# lookup for 2^n, which is why 2^n is built from its bits).
_F = np.float32
_LOG2E, _LN2_HI, _LN2_LO = _F(1.4426950408889634), _F(0.693359375), _F(-2.1219444005469057e-4)
_TAYLOR = tuple(_F(1.0 / math.factorial(i)) for i in range(8))
_ONE, _TWO, _HALF, _LO, _HI = _F(1.0), _F(2.0), _F(0.5), _F(-87.0), _F(88.0)


@numba.njit(inline="always")
def _exp(x):  # pragma: no cover - compiled
    x = min(max(x, _LO), _HI)
    n = np.floor(x * _LOG2E + _HALF)
    r = x - n * _LN2_HI - n * _LN2_LO
    c = _TAYLOR
    p = c[0] + r * (c[1] + r * (c[2] + r * (c[3] + r * (c[4] + r * (c[5] + r * (c[6]
                                                                   + r * c[7]))))))
    return p * _float_of_bits(np.uint32(np.int32(n) + np.int32(127)) << np.uint32(23))


@numba.njit(inline="always")
def gru_unit(r_in, z_in, x_n, h_n, h):  # pragma: no cover - compiled
    """One hidden unit's next state (nn.GRU's maths): r = σ(r_in), z = σ(z_in),
    n = tanh(x_n + r·h_n), h' = (1 − z)·n + z·h; r_in and z_in hold both projections and
    both biases, x_n = W_in·x + b_in and h_n = W_hn·h + b_hn."""
    r = _ONE / (_ONE + _exp(-r_in))
    z = _ONE / (_ONE + _exp(-z_in))
    n = _TWO / (_ONE + _exp(-_TWO * (x_n + r * h_n))) - _ONE  # tanh
    return n + z * (h - n)
