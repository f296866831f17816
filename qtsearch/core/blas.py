"""numpy's BLAS held to one thread around the small products of a query (a GRU query's input
projections, word alignment's cosines): BLAS threads spinning up for a product of a few
hundred rows made it many times slower on busy cores, behind faiss's and BM25's threads."""

from __future__ import annotations

import functools
import threading
from typing import Any


class OneBlasThread:
    """`with ONE_BLAS_THREAD:` runs its block with numpy's BLAS on one thread. The limit is
    process-wide, so concurrent queries (a server's threads) share it: the first one in sets it
    and the last one out restores the original, which nested save/restore pairs would not (two
    overlapping queries could leave BLAS at one thread for good)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limiter: Any = None

    @functools.cached_property
    def controller(self) -> Any:
        """The BLAS libraries loaded by the first use (numpy's), found once: a one-shot query
        that never needs them does not pay for the search."""
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController()

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                self._limiter = self.controller.limit(limits=1, user_api="blas")
            self._users += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._limiter.restore_original_limits()
                self._limiter = None


ONE_BLAS_THREAD = OneBlasThread()
