"""Searches that wait for a thread, merged into one.

A worker process works on `Limits.threads` requests at once; under load the others wait on
its event loop. Waiting searches that ask alike (one query each, the same k, mode, filter and
unit, no ids, no re-ranking) go to a thread together, up to MOST_MERGED in the order they
came, and are searched as one part (`Index.search_many`): one call's set-up, one encoding and
one read of the store, ~20% less CPU a query at 4 or more (docs/serving.md, "Merged
searches"). A part's requests are answered as soon as it is done, and the thread goes on with
the next part while searches wait, without a turn through the event loop. One such thread at a
time per worker. With no search running, a search starts at once, alone: merging adds no wait.

Each request gets the answer it would have got alone: `search_many` answers each of up to
ALONE_UP_TO queries as it would alone (qtsearch.search.searcher), and what a part cannot
vouch for is answered request by request (the server's `merged`, qtsearch.app.serve.app).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from qtsearch.search.defaults import ALONE_UP_TO

#: Searches of one `answer` call at most: as many as faiss searches one at a time (a larger
#: batch goes to faiss whole, whose scores can differ in the last bits); the CPU saved a query
#: levels off from 4 anyway, while each of them waits for the whole part.
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


#: A waiting search: its Ask, and the future its request awaits.
Waiting = tuple[Ask, "asyncio.Future[Any]"]


class Merger:
    """Hands waiting Asks to `answer` in a worker thread, alike ones together, `most` at a time
    in order of arrival; `answer` takes a list of alike Asks and returns one outcome each (a
    response, or the exception to raise in its request). `slots`: how many threads answer at
    once. A thread takes the next part as soon as it has answered one, until none waits."""

    def __init__(self, answer: Callable[[list[Ask]], Sequence[Any]], slots: int,
                 most: int = MOST_MERGED):
        self._answer = answer
        self._most = most
        self._lock = threading.Lock()  # guards _waiting and _free (the loop's and the threads')
        self._free = slots
        self._waiting: list[Waiting] = []
        self._running: set[asyncio.Task[None]] = set()  # kept from the collector

    async def answer(self, ask: Ask) -> Any:
        """The outcome of `ask`: its response, or its exception raised here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            self._waiting.append((ask, future))
            start = self._free > 0
            self._free -= start
        if start:
            running = loop.create_task(anyio.to_thread.run_sync(self._answer_parts, loop))
            self._running.add(running)
            running.add_done_callback(self._running.discard)
        outcome = await future
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _next_part(self) -> list[Waiting]:
        """The first waiting search and the alike ones after it, up to `most`; none (and the
        thread's slot given back) when no search waits."""
        with self._lock:
            # a request cancelled while it waited (its client went away) is not searched
            # (its future read from this thread: one cancelled just now is searched, its
            # answer dropped by _settle)
            self._waiting = [w for w in self._waiting if not w[1].done()]
            if not self._waiting:
                self._free += 1
                return []
            alike = self._waiting[0][0].alike
            part: list[Waiting] = []
            rest: list[Waiting] = []
            for w in self._waiting:
                (part if w[0].alike == alike and len(part) < self._most else rest).append(w)
            self._waiting = rest
            return part

    def _answer_parts(self, loop: asyncio.AbstractEventLoop) -> None:
        """In a worker thread: the waiting searches answered part after part, each part's
        requests answered on the event loop as soon as it is."""
        while part := self._next_part():
            try:
                outcomes: Sequence[Any] = self._answer([ask for ask, _ in part])
            except Exception as e:  # a failure reaches every request of its part
                outcomes = [e] * len(part)
            loop.call_soon_threadsafe(_settle, part, outcomes)


def _settle(part: list[Waiting], outcomes: Sequence[Any]) -> None:
    """Each request of `part` given its outcome, unless its client went away and it was
    cancelled."""
    for (_, future), outcome in zip(part, outcomes, strict=True):
        if not future.done():
            future.set_result(outcome)
