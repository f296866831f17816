"""Searches that wait for a thread, merged into one.

A worker process works on `Limits.threads` requests at once; under load the others wait on
its event loop. Waiting searches that ask alike (one query each, the same k, mode, filter and
unit, no ids, no re-ranking) go to a thread together, up to MOST_MERGED, one batch at a time
per worker, and are searched as one batch (`Index.search_many`): one call's set-up, one
encoding and one read of the store for all of them, ~20% less CPU a query at 4 or more
(docs/serving.md, "Merged searches"). With no batch running, a search starts at once, alone:
merging adds no wait.

Each request gets the answer it would have got alone: `search_many` answers each of up to
ALONE_UP_TO queries as it would alone (qtsearch.search.searcher), and what a batch cannot
vouch for is answered request by request (the server's `merged`, qtsearch.app.serve.app).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from qtsearch.search.defaults import ALONE_UP_TO

#: Searches handed to one thread at most: as many as faiss searches one at a time (a larger
#: batch goes to faiss whole, whose scores can differ in the last bits); the CPU saved a query
#: levels off from 4 anyway, while each of them waits for the whole batch.
MOST_MERGED = ALONE_UP_TO


@dataclass(frozen=True)
class Ask:
    """One request's search of one query."""

    query: str
    k: int
    mode: str | None
    where: tuple[tuple[str, str | int], ...]
    by: str
    explain: bool

    @property
    def alike(self) -> tuple[Any, ...]:
        """What the searches merged with this one share (all but the query and `explain`)."""
        return self.k, self.mode, self.where, self.by


class Merger:
    """Hands waiting Asks to `answer` in a worker thread, alike ones together; `answer` takes
    a list of alike Asks and returns one outcome each (a response, or the exception to raise
    in its request). `slots`: how many batches run at once."""

    def __init__(self, answer: Callable[[list[Ask]], Sequence[Any]], slots: int,
                 most: int = MOST_MERGED):
        self._answer = answer
        self._free = slots
        self._most = most
        self._waiting: list[tuple[Ask, asyncio.Future[Any]]] = []
        self._running: set[asyncio.Task[Sequence[Any]]] = set()  # kept from the collector

    async def answer(self, ask: Ask) -> Any:
        """The outcome of `ask`: its response, or its exception raised here."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((ask, future))
        self._start()
        outcome = await future
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _start(self) -> None:
        # a request cancelled while it waited (its client went away) is not searched
        self._waiting = [w for w in self._waiting if not w[1].done()]
        while self._free and self._waiting:
            alike = self._waiting[0][0].alike
            taken: list[tuple[Ask, asyncio.Future[Any]]] = []
            rest: list[tuple[Ask, asyncio.Future[Any]]] = []
            for w in self._waiting:
                (taken if w[0].alike == alike and len(taken) < self._most else rest).append(w)
            self._waiting = rest
            self._free -= 1
            running = asyncio.get_running_loop().create_task(
                anyio.to_thread.run_sync(self._answer, [ask for ask, _ in taken]))
            self._running.add(running)
            running.add_done_callback(functools.partial(self._done, taken))

    def _done(self, taken: list[tuple[Ask, asyncio.Future[Any]]],
              running: asyncio.Task[Sequence[Any]]) -> None:
        self._free += 1
        self._running.discard(running)
        if running.cancelled():
            outcomes: Sequence[Any] = [asyncio.CancelledError()] * len(taken)
        elif (failed := running.exception()) is not None:
            outcomes = [failed] * len(taken)
        else:
            outcomes = running.result()
        for (_, future), outcome in zip(taken, outcomes, strict=True):
            if not future.done():  # a request whose client went away was cancelled
                future.set_result(outcome)
        self._start()
