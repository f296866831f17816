"""SQLite failures a user can act on, told as such: a full disk (exit 6, naming the file) and a
damaged database (exit 5, "rebuild the index"), instead of an internal error that quotes SQL.

Errors are recognised by SQLite's own words (its result codes SQLITE_FULL, SQLITE_CORRUPT,
SQLITE_NOTADB) so that a query's own mistake, an FTS5 syntax error say, is never mistaken for
damage.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from qtsearch.core.errors import DamagedIndex, OutputError, QTSearchError

SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 11, 13, 26  # SQLite's primary result codes
_FULL = ("database or disk is full", "disk is full")
_DAMAGED = ("malformed", "file is not a database", "database corruption", "disk i/o error",
            "fts5: corrupt", "vtable constructor failed")


def sqlite_failure(path: Path, error: BaseException) -> QTSearchError | None:
    """The one-line error for `error` raised while using the SQLite database `path`; None
    when it is none of those (the caller re-raises it as it is)."""
    if isinstance(error, QTSearchError):
        return None
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return OutputError(f"{path}: no space left on the device; free some and run the "
                           "same command again")
    if not isinstance(error, sqlite3.DatabaseError):
        return None
    why = (str(error).splitlines() or [type(error).__name__])[0]
    low = why.lower()
    code = getattr(error, "sqlite_errorcode", None)  # extended codes keep the primary in 8 bits
    if any(w in low for w in _FULL) or (code is not None and code & 0xFF == SQLITE_FULL):
        return OutputError(f"{path}: no space left on the device ({why}); free some and run "
                           "the same command again")
    corrupt = code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    if corrupt or any(w in low for w in _DAMAGED) or type(error) is sqlite3.DatabaseError:
        return DamagedIndex(f"{path}: damaged SQLite database ({why}); rebuild the index")
    return None
