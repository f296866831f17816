"""Consecutive lists of a stream's items, so that a stage holds one list at a time whatever the
stream's length (`itertools.batched` from Python 3.12 on, which gives tuples)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of `size` items (the last one shorter; none for no items)."""
    if size < 1:
        raise ValueError(f"chunks of {size} items")
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
