"""glibc's allocator kept from giving freed memory back to the system between training steps.

A training step frees and allocates tensors of the same sizes again and again (gradients and
optimiser temporaries as large as the word table). By default glibc returns the top of its heap
to the system on each free and faults fresh pages in on the next step, so that adapting to a
large corpus spent more CPU time in the kernel than in the model (docs/adapt.md, "Costs and
limits").
"""

from __future__ import annotations

import ctypes
import sys

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD = -1, -2
#: Free memory glibc keeps at the top of the heap (the most mallopt takes), and the extra it
#: asks for each time the heap grows (address space: only touched pages take memory).
TRIM_THRESHOLD = 2**31 - 1
TOP_PAD = 1 << 30


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for a training process; False where it is not glibc (the defaults
    stay). The peak memory is unchanged: what a step frees is reused by the next."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl or another C library
        return False
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(M_TOP_PAD, TOP_PAD))
