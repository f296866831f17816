"""Errors a user can act on. The CLI prints their message as one line and exits with `code`.

Exit codes (documented in docs/errors.md): 1 unexpected failure, 2 bad option or usage,
3 bad input data, 4 bad or missing model, 5 bad or missing index, 6 cannot write output,
7 busy (another writer holds the index: try again later, or pass --wait), 130 interrupted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import threading


class QTSearchError(Exception):
    """Base class: a failure explained in one line, never a traceback."""

    code = 1


class UsageError(QTSearchError):
    code = 2


class InputError(QTSearchError):
    code = 3


class ModelError(QTSearchError):
    code = 4


class UnusableIndex(QTSearchError):
    code = 5


class DamagedIndex(UnusableIndex):
    """An index whose files are damaged (not merely missing or of another version): the server
    answers 500, the index's own failure, not the request's (qtsearch.app.serve.request_limits)."""


class OutputError(QTSearchError):
    code = 6


class BusyError(QTSearchError):
    """Another process is writing this index (qtsearch.index.lock): nothing was changed, and
    the same command succeeds once that writer is done."""

    code = 7


class Interrupted(QTSearchError):
    """Ctrl-C (or SIGTERM in training): the message says what was kept and how to continue."""

    code = 130


class Stopped(Exception):
    """Work running beside other work was asked to stop: that work failed or was interrupted
    (qtsearch.indexing.state.stage_beside). Never shown: the other work's error is."""

    @staticmethod
    def check(stop: threading.Event | None) -> None:
        """Raise Stopped once `stop` is set (None: never)."""
        if stop is not None and stop.is_set():
            raise Stopped
