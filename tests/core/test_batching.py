"""qtsearch.core.batching: consecutive lists of a stream, as the BM25 build and `add` read it."""

from __future__ import annotations

import itertools

import pytest

from qtsearch.core.batching import chunks


def test_chunks_keep_order_and_end_shorter():
    assert list(chunks(range(7), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks(range(6), 3)) == [[0, 1, 2], [3, 4, 5]]
    assert list(chunks([], 3)) == []


def test_chunks_read_a_stream_lazily():
    """An endless stream gives its first chunks: nothing is read ahead of the one asked for."""
    taken = list(itertools.islice(chunks(itertools.count(), 2), 3))
    assert taken == [[0, 1], [2, 3], [4, 5]]


def test_a_chunk_of_no_items_is_refused():
    with pytest.raises(ValueError, match="chunks of 0 items"):
        list(chunks([1], 0))
