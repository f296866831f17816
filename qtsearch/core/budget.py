"""What one request may still spend: stored text read and time, checked before each read.

A server cannot stop a search thread from outside, and an answer's size is known only once its
rows are read. So the store asks the budget of the running request (`spending`) before it reads
rows: it measures their text in SQLite first (`length(text)`, without handing the text to
Python), charges it, and checks the deadline. A request over its text allowance fails before
its rows become Python strings, hits, folds and JSON (each a copy or more of that text); one
past its deadline fails at its next read, which every query of a search makes. Outside a
`spending` block (the CLI, the Python API) nothing is checked.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from qtsearch.core.errors import QTSearchError

#: What a refused search can ask for instead (the default advice of a Budget).
SEARCH_ADVICE = "ask for fewer queries or a smaller k"


class OverBudget(QTSearchError):
    """A request would read more stored text than it may (HTTP 413)."""


class OverTime(QTSearchError):
    """A request is still working at its deadline (HTTP 503: retry, or ask for less)."""


@dataclass
class Budget:
    """`chars`: characters of stored text the request may read in all (None: no bound);
    `seconds`: how long it may run from its start (None: no bound); `advice`: what a refused
    client can ask for instead."""

    chars: int | None = None
    seconds: float | None = None
    advice: str = SEARCH_ADVICE

    def __post_init__(self) -> None:
        self.read = 0
        self.deadline = None if self.seconds is None else time.monotonic() + self.seconds

    def check_time(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OverTime(f"request still working after {self.seconds:g} s: retry later, "
                           f"or {self.advice}")

    def charge(self, chars: int) -> None:
        """Count `chars` more characters read; OverBudget (nothing charged) past the limit."""
        self.check_time()
        if self.chars is not None and self.read + chars > self.chars:
            raise OverBudget(f"request would read {self.read + chars:,} characters of stored "
                             f"text: at most {self.chars:,} ({self.advice})")
        self.read += chars

    def rest(self) -> Budget:
        """What is left of this budget: the characters not read yet, by the same deadline."""
        left = Budget(None if self.chars is None else self.chars - self.read, None, self.advice)
        left.seconds, left.deadline = self.seconds, self.deadline
        return left


_current: ContextVar[Budget | None] = ContextVar("qtsearch_budget", default=None)


def current() -> Budget | None:
    """The budget of the request running in this thread, or None."""
    return _current.get()


@contextlib.contextmanager
def spending(budget: Budget) -> Iterator[Budget]:
    """Run the block under `budget` (reads in this thread charge it)."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
