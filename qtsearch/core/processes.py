"""Worker processes for a build's CPU-bound Python (tokenising, BM25 analysis): spawned, not
forked (a build's process holds torch's and faiss's thread pools, which a fork would copy in
an unknown state), Ctrl-C left to the parent, which handles it, and the tasks not yet started
dropped when the block is left, also on Ctrl-C or a failure."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a pool starts: a query never starts one, and its import
    # (multiprocessing) was a noticeable part of a one-shot query's start (docs/speed.md)
    from concurrent.futures import ProcessPoolExecutor


@contextmanager
def worker_pool(workers: int, initializer: Callable[..., None] | None = None,
                initargs: tuple[Any, ...] = ()) -> Iterator[ProcessPoolExecutor]:
    """`workers` processes, each running `initializer(*initargs)` first."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start,
                             initargs=(initializer, initargs)) as pool:
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _start(initializer: Callable[..., None] | None, initargs: tuple[Any, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if initializer is not None:
        initializer(*initargs)
