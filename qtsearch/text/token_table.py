"""Many texts' tokens at once, dictionary-encoded: each distinct token once, in the order first
met, where each token stands among them, and each text's count of tokens.

A build splits millions of texts (BM25's words, the tokeniser's words). A list of tokens a
text made a Python string a token and left the lookups a token at a time; here the texts are
one UTF-8 buffer that pyarrow's string kernels split and dictionary-encode, so Python sees the
distinct tokens only (a build's BM25 analysis took half the time, its tokenisers a fifth
less; docs/speed.md). pyarrow is imported when first needed: a query never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class TokenTable:
    """Texts' tokens, dictionary-encoded (`split_table`)."""

    #: the distinct tokens, in the order first met
    distinct: list[str]
    #: each token's place in `distinct`, text after text (int64)
    place: np.ndarray
    #: each text's count of tokens (int64)
    counts: np.ndarray


def split_table(parts: list[bytes], table: bytes | None = None) -> TokenTable:
    """The tokens of texts given as UTF-8 (`parts`), each split at spaces, after translating
    its bytes through `table` (`bytes.translate`'s, which must keep UTF-8 valid and may turn
    bytes into spaces). A token is never empty: runs of spaces, and spaces at either end,
    separate tokens, as `str.split()`'s do where spaces are the only whitespace."""
    import pyarrow as pa
    import pyarrow.compute as pc

    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)) + 1, out=offsets[1:])
    joined = b" ".join(parts) + b" "  # a text ends in a space: no token runs into the next
    if table is not None:
        joined = joined.translate(table)
    split = pc.split_pattern(pa.LargeStringArray.from_buffers(
        len(parts), pa.py_buffer(offsets), pa.py_buffer(joined)), " ")
    encoded = split.flatten().dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    place = _ints(encoded.indices).astype(np.int64)
    counts = np.diff(_ints(split.offsets)).astype(np.int64)
    if "" in distinct:  # the split's empty strings, between and around spaces: no tokens
        empty = distinct.index("")
        real = place != empty
        text_of = np.repeat(np.arange(len(parts)), counts)
        counts = np.bincount(text_of[real], minlength=len(parts)).astype(np.int64)
        place = place[real]
        place -= place > empty
        del distinct[empty]
    return TokenTable(distinct, place, counts)


def _ints(array: pa.Array) -> np.ndarray:
    """An arrow array of integers without nulls, read from its buffer (a view): `to_numpy`
    would import pandas, ~0.3 s a worker process."""
    width = array.type.bit_width // 8
    values = np.frombuffer(array.buffers()[1], dtype=np.dtype(f"<i{width}"))
    return values[array.offset : array.offset + len(array)]
