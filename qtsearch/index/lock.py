"""One writer at a time per index folder, and a swap that cannot lose the index.

The lock is an OS lock (`fcntl.flock`) on `NAME.lock` beside the index folder `NAME`, not in it:
the folder itself is renamed away by every swap, and the lock must also cover the work folders
beside it (`NAME.partial`, `NAME.adding`, `NAME.old-PID`). Every writer (`build-index`, `add`,
the server's POST /add, derived builds) takes it; readers never do, so a search never waits.
The kernel drops the lock when its holder dies, however it dies (`kill -9` included), so there
is no stale lock to recognise or clean up: a leftover `NAME.lock` file is just a file. The
holder writes its pid and command into the file, for the message a second writer gets.

The file is unlinked by its holder on release, while still locked; so a process that opened
the file before that and then gets the lock checks that the path still names the very file it
locked, and otherwise starts over (the usual pattern for lock files that are removed).

`swap_in` puts a finished folder in place of the index. Where the file system can exchange two
names atomically (Linux `renameat2(RENAME_EXCHANGE)`: ext4, xfs, btrfs, tmpfs), the path never
stops naming a whole index. Elsewhere it takes two renames (index → `NAME.old-PID`, new →
index); a kill between them leaves no folder at the path, and `restore` (run by every writer
under the lock, and by a reader that finds the folder missing) renames the old one back.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qtsearch.core.disk import remove_tree, writing
from qtsearch.core.errors import BusyError, OutputError

log = logging.getLogger("qtsearch")

#: Suffixes of the folders beside an index that a writer owns (the lock covers them all).
LOCK_SUFFIX = ".lock"
OLD_INFIX = ".old-"
#: How long a refused writer waits for the holder's name to appear in the lock file.
HOLDER_GRACE = 1.0
#: How often a waiting writer retries (flock has no timeout of its own).
POLL_SECONDS = 0.1
#: Test hook: "NAME" makes the process SIGKILL itself at that point of a swap (see `_hook`).
KILL_ENV = "QTSEARCH_TEST_KILL_AT"


def real_folder(folder: str | os.PathLike) -> Path:
    """The folder a writer locks, writes beside and swaps: `folder` itself, or where it is a
    symbolic link (to a link, …), the folder it finally points to. Resolved once per write,
    so the link is never renamed or replaced, only read through."""
    folder = Path(folder)
    return folder.resolve() if folder.is_symlink() else folder


def lock_path(folder: str | os.PathLike) -> Path:
    folder = real_folder(folder)
    return folder.with_name(folder.name + LOCK_SUFFIX)


def holder(folder: str | os.PathLike) -> dict[str, Any]:
    """What the current holder wrote into the lock file ({} if nothing readable)."""
    try:
        data = json.loads(lock_path(folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _named_holder(folder: Path) -> dict[str, Any]:
    """The holder's record, waiting briefly for it: a writer takes the lock first and writes
    its name a moment later, and a second writer arriving in between should still be told
    whom it waits for."""
    deadline = time.monotonic() + HOLDER_GRACE
    info = holder(folder)
    while not info.get("pid") and time.monotonic() < deadline:
        time.sleep(0.01)
        info = holder(folder)
    return info


def describe(info: dict[str, Any]) -> str:
    """`pid 123 (qtsearch add idx more.txt, since 13:55:02 UTC)`, or a vaguer phrase when the
    holder has not written its name yet."""
    if not info.get("pid"):
        return "another process"
    command = str(info.get("command") or "?")
    if len(command) > 120:
        command = command[:117] + "..."
    since = info.get("since", "")
    return f"pid {info['pid']} ({command}" + (f", since {since}" if since else "") + ")"


def command_line() -> str:
    """This process's command as the user typed it, for the lock file."""
    argv = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else ["python"]
    if argv[0] in ("cli.py", "__main__.py", "-c"):
        argv[0] = "qtsearch"
    return " ".join(argv)


@contextlib.contextmanager
def writer_lock(folder: str | os.PathLike, command: str | None = None,
                wait: float | None = 0.0,
                on_wait: Callable[[str], None] | None = None) -> Iterator[Path]:
    """Hold the writer lock of index folder `folder` for the block.

    `wait`: 0 refuses at once when another writer holds it (BusyError naming the holder, exit
    7), None waits as long as it takes, a number waits that many seconds. `on_wait` is told
    once, in one line, whom this writer waits for. Leftovers of a writer that was killed
    mid-swap are put right (`restore`) before the block runs. A `folder` that is a symbolic
    link is locked as the folder it points to (`real_folder`).
    """
    folder = real_folder(folder)
    path = lock_path(folder)
    deadline = None if wait is None else time.monotonic() + wait
    told = False
    while True:
        fd = _open(path)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    who = describe(_named_holder(folder))
                    if deadline is not None and time.monotonic() >= deadline:
                        raise BusyError(
                            f"{folder}: another writer is at work on this index: {who}; "
                            "wait for it to finish" + (" (or rerun with --wait)"
                                                       if not wait else "")) from None
                    if on_wait is not None and not told:
                        on_wait(f"{folder}: waiting for {who} to finish writing the index")
                        told = True
                    time.sleep(POLL_SECONDS)
            if _same_file(fd, path):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # the holder before us removed this file: lock the new one
    try:
        with writing(path):  # a full disk: one line naming the lock file
            _write_holder(fd, command or command_line())
        restore(folder)
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # still locked: a process waiting on it will notice and start over
        os.close(fd)


def _open(path: Path) -> int:
    try:
        # the user's umask decides who may read it, as for every other file we write
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            index = path.with_name(path.name.removesuffix(LOCK_SUFFIX))
            raise OutputError(f"{index}: cannot write beside this index ({e.strerror}): it is "
                              "read-only here") from None
        if e.errno == errno.ENOENT:
            raise OutputError(f"{path.parent}: no such folder") from None
        raise


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _write_holder(fd: int, command: str) -> None:
    since = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    data = json.dumps({"pid": os.getpid(), "command": command, "since": since}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data + b"\n", 0)


# -------------------------------------------------------------------------------------------
# The swap


def _hook(point: str) -> None:
    """Die here if the crash tests asked for it (KILL_ENV names the point)."""
    if os.environ.get(KILL_ENV) == point:
        os.kill(os.getpid(), 9)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2: Any = None


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names `a` and `b` in one atomic step; False where this system cannot."""
    global _renameat2
    if os.environ.get("QTSEARCH_NO_EXCHANGE") or not sys.platform.startswith("linux"):
        return False
    if _renameat2 is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _renameat2 = libc.renameat2
            _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                                   ctypes.c_char_p, ctypes.c_uint]
        except (OSError, AttributeError):
            _renameat2 = False
    if not _renameat2:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # this file system cannot: fall back to two renames
    raise OSError(code, os.strerror(code), str(b))


def swap_in(new: Path, out: Path) -> None:
    """Put the finished folder `new` at `out`: a reader sees the old index or the new one,
    never a mix, and after a kill at any point `out` holds one of them (or `restore` brings
    the old one back). The old one is deleted only after the new one is in place. An `out`
    that is a symbolic link is left one: the folder it points to is replaced."""
    out = real_folder(out)
    _fsync_dir(new)
    _hook("before-swap")
    if not out.exists():
        os.replace(new, out)
        _fsync_dir(out.parent)
        return
    if _exchange(new, out):  # `new` now names the old index
        _fsync_dir(out.parent)
        _hook("after-exchange")
        remove_tree(new)
        return
    old = out.with_name(f"{out.name}{OLD_INFIX}{os.getpid()}")
    os.replace(out, old)
    _hook("between-renames")
    try:
        os.replace(new, out)
    except OSError:
        os.replace(old, out)
        raise
    _fsync_dir(out.parent)
    _hook("before-cleanup")
    remove_tree(old)


def _fsync_dir(folder: Path) -> None:
    """Make renames in `folder` durable (a power cut after the swap keeps it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def leftovers(out: Path) -> list[Path]:
    """Old index folders that a killed swap left beside `out` (`NAME.old-PID`)."""
    if not out.parent.is_dir():
        return []
    prefix = out.name + OLD_INFIX
    return sorted(p for p in out.parent.iterdir()
                  if p.name.startswith(prefix) and p.name[len(prefix):].isdigit())


def restore(out: Path) -> bool:
    """Put right what a kill in the middle of `swap_in` left (the caller holds the lock, so
    the writer that left it is gone): with no folder at `out`, the old index goes back (the
    newest, if several); an old folder beside a whole `out` is deleted, and so is a killed
    `add`'s work folder. A build's `NAME.partial` with its resume state stays for the rerun.
    True if it restored."""
    old = leftovers(out)
    restored = False
    if old and not out.exists():
        back = max(old, key=lambda p: p.stat().st_mtime_ns)
        os.replace(back, out)
        _fsync_dir(out.parent)
        old.remove(back)
        log.warning("%s: restored the index from %s, left by a writer that was killed "
                    "mid-swap", out, back.name)
        restored = True
    # an `add`'s work folder, or an old index that an exchange left under the work folder's
    # name (a build's `.partial` without its resume state): their writer is gone
    adding = out.with_name(out.name + ".adding")
    partial = out.with_name(out.name + ".partial")
    if (partial / "manifest.json").is_file() and not (partial / "state.json").exists():
        old.append(partial)
    if adding.exists():
        old.append(adding)
    for stale in old:
        with contextlib.suppress(OSError):
            remove_tree(stale)
    return restored


def restore_if_missing(out: Path) -> bool:
    """For readers: when `out` is missing but a killed swap left its old index beside it, put
    it back, if no writer is at work (else the writer is mid-swap and will finish). True if
    the index is there now."""
    out = real_folder(out)
    if out.exists() or not leftovers(out):
        return out.exists()
    with contextlib.suppress(BusyError, OutputError, OSError), writer_lock(out, "restore"):
        pass  # taking the lock restores
    return out.exists()
