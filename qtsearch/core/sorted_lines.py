"""Sorted lines as a lookup table that needs no loading: strings sorted by their UTF-8 bytes,
each followed by a newline, and the offset where each starts (one past the end last). A string
is found by binary search over the bytes in place (~20 steps at a million lines), so a file of
them is memory-mapped and used as it is: nothing read until a lookup, and only the pages the
search touches then. The BM25 terms and an index's corpus words are kept this way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


def line_blob(lines: Sequence[str]) -> tuple[bytes, np.ndarray]:
    """(the bytes, int64 offsets [len(lines) + 1]) of `lines`, which the caller has sorted
    (`sorted` orders str as UTF-8 orders bytes) and which hold no newline."""
    import numpy as np

    encoded = [s.encode("utf-8") for s in lines]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(s) + 1 for s in encoded], out=offsets[1:])
    return b"".join(s + b"\n" for s in encoded), offsets


def find_line(blob: Any, offsets: Any, key: str) -> int | None:
    """The number of the line that is `key`, None where none is. `blob`: bytes, an mmap or a
    uint8 array; `offsets`: as `line_blob` makes them."""
    want = key.encode("utf-8")
    lo, hi = 0, len(offsets) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        found = bytes(blob[int(offsets[mid]):int(offsets[mid + 1]) - 1])
        if found < want:
            lo = mid + 1
        elif found > want:
            hi = mid
        else:
            return mid
    return None
