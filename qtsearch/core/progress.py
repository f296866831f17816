"""How the library reports progress: a `Reporter` it calls, and nothing it draws.

Long work (builds, training, benchmarks) calls `reporter.stage(name, total)` for each stage and
advances what it yields, `note` for a line worth keeping and `status` for periodic figures. The
base class shows nothing (notes go to the log, warnings as warnings), so the library runs
silently from Python by default; the command line passes a reporter that draws bars
(`qtsearch.app.progress_bars`). A script may pass its own.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import TracebackType

log = logging.getLogger("qtsearch")


class Stage:
    """A stage under way: call it with a count to advance; `update` sets the count and a short
    text; `grow` raises the total (totals of a stage may be estimates)."""

    def __call__(self, n: float) -> None:
        """Advance by `n`."""

    def update(self, completed: float, info: str | None = None) -> None:
        """Set the count done (and the text beside it; None keeps it)."""

    def grow(self, n: float) -> None:
        """Raise the expected total by `n`."""


class Reporter:
    """Progress of long work: this base shows nothing. Used as a context manager around the
    whole work, so that a display can start once and end with it."""

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    @contextlib.contextmanager
    def stage(self, name: str, total: float | None = None, unit: str = "",
              completed: float = 0, keep: bool = True) -> Iterator[Stage]:
        """One stage of the work for the duration of the block; a display may drop it at
        the end unless `keep` (a benchmark's many short stages)."""
        yield Stage()

    def note(self, text: str, warn: bool = False) -> None:
        """A line worth keeping (a data summary, a validation, a warning)."""
        log.log(logging.WARNING if warn else logging.INFO, text)

    def status(self, text: str) -> None:
        """Periodic figures, which a bar may show instead of a line."""
