"""Writing files where the disk may fill up or the files may be read-only: one line that names
the file and says why (exit 6), whichever library did the writing.

Each library reports a full disk in its own words: Python's OSError (errno 28), pyarrow's
"[errno 28]", numpy's short write ("51200 requested and 3040 written", no errno at all),
safetensors' "os error 28", faiss's C++ assertion quoting strerror. `writing` recognises them
all and names the file being written, which the libraries mostly do not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from qtsearch.core.errors import OutputError, QTSearchError

#: The words every full-disk message uses (tests and the docs look for them).
NO_SPACE = "no space left on the device"
_NO_SPACE_TEXT = ("no space left on device", "errno 28", "os error 28",
                  "database or disk is full")
#: numpy's `tofile` (under `np.save`) on a short write: the only sign it gives of a full disk.
_SHORT_WRITE = re.compile(r"\b\d+ requested and \d+ written\b")


def no_space(error: BaseException) -> bool:
    """Whether `error` says the device (or the user's quota) is full."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error).lower()
    return any(w in text for w in _NO_SPACE_TEXT) or bool(_SHORT_WRITE.search(text))


def device_full(path: str | os.PathLike, margin: int = 1 << 20) -> bool:
    """Whether the file system holding `path` (or its nearest existing parent) has less than
    `margin` bytes left: what a vague write error (SQLite's "disk I/O error") means there."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free < margin
    except OSError:
        return False


def no_space_error(path: str | os.PathLike, why: str | None = None) -> OutputError:
    """The one line for a full disk met while writing `path` (`why`: the library's words)."""
    return OutputError(f"{path}: {NO_SPACE}" + (f" ({why})" if why else "") +
                       "; free some and run the same command again")


@contextlib.contextmanager
def writing(path: str | os.PathLike, tmp: str | os.PathLike | None = None) -> Iterator[None]:
    """Write `path` (through `tmp`, removed on failure) in the block: a full disk ends it as
    one OutputError naming `path`, and a permission error as one naming the file refused."""
    try:
        yield
    except QTSearchError:
        raise
    except Exception as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if no_space(e):
            raise no_space_error(path) from e
        if isinstance(e, PermissionError):
            raise OutputError(f"{e.filename or path}: cannot write it (permission denied)") \
                from e
        raise


def read_only_part(folder: Path) -> Path | None:
    """The first file or folder of `folder` (itself included) that this process may not
    write, or None: a writer that replaces the folder must write its copy and delete the old
    one, so one read-only part is enough to fail half-way."""
    for path in (folder, *sorted(folder.rglob("*"))):
        if not path.is_symlink() and not os.access(path, os.W_OK):
            return path
    return None


def remove_tree(folder: Path) -> None:
    """Delete `folder` and everything in it, also where a read-only folder inside it (copied
    from a read-only index) would stop `shutil.rmtree`: such a folder is made writable first.
    Missing is fine; a symbolic link is unlinked, never followed."""
    if folder.is_symlink():
        folder.unlink()
        return
    if not folder.exists():
        return

    def writable_then_retry(func: Callable[[str], object], path: str, _error: object) -> None:
        parent = os.path.dirname(path)
        with contextlib.suppress(OSError):
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | stat.S_IRWXU)
        func(path)

    if sys.version_info >= (3, 12):  # `onerror` is deprecated there
        shutil.rmtree(folder, onexc=writable_then_retry)
    else:
        shutil.rmtree(folder, onerror=writable_then_retry)
