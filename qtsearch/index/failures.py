"""SQLite failures a user can act on, told as such: a full disk (exit 6, naming the file) and a
damaged database (exit 5, "rebuild the index"), instead of an internal error that quotes SQL.

Errors are recognised by SQLite's own words (its result codes SQLITE_FULL, SQLITE_CORRUPT,
SQLITE_NOTADB) so that a query's own mistake, an FTS5 syntax error say, is never mistaken for
damage. A database that cannot be written (SQLITE_READONLY: its file or folder is read-only)
is an output error too.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from qtsearch.core.disk import device_full, no_space_error
from qtsearch.core.errors import DamagedIndex, OutputError, QTSearchError

SQLITE_READONLY, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 8, 11, 13, 26  # primary codes
_FULL = ("database or disk is full", "disk is full")
_DAMAGED = ("malformed", "file is not a database", "database corruption", "disk i/o error",
            "fts5: corrupt", "vtable constructor failed")


def sqlite_failure(path: Path, error: BaseException) -> QTSearchError | None:
    """The one-line error for `error` raised while using the SQLite database `path`; None
    when it is none of those (the caller re-raises it as it is)."""
    if isinstance(error, QTSearchError):
        return None
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return no_space_error(path)
    if not isinstance(error, sqlite3.DatabaseError):
        return None
    why = (str(error).splitlines() or [type(error).__name__])[0]
    low = why.lower()
    code = getattr(error, "sqlite_errorcode", None)  # extended codes keep the primary in 8 bits
    if any(w in low for w in _FULL) or (code is not None and code & 0xFF == SQLITE_FULL):
        return no_space_error(path, why)
    if "disk i/o error" in low and device_full(path):  # SQLite's words when even its journal
        return no_space_error(path)                    # cannot be created on a full disk
    if "readonly database" in low or (code is not None and code & 0xFF == SQLITE_READONLY):
        return OutputError(f"{path}: cannot write it: it is read-only ({why})")
    corrupt = code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    if corrupt or any(w in low for w in _DAMAGED) or type(error) is sqlite3.DatabaseError:
        return DamagedIndex(f"{path}: damaged SQLite database ({why}); rebuild the index")
    return None
