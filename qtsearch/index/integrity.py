"""Integrity you can check: the manifest records every file of the index (bytes, sha256 and
modification time), `qtsearch check INDEX` verifies them and that vectors, rows, full-text rows
and the manifest's count agree, and every open compares each file's size and time with the
record (a few `stat`s).

A flipped bit inside `index.faiss` or `transform.safetensors` changes answers without any
reader noticing; only a checksum sees it, and reading every byte at each open would cost a
one-shot query seconds per GB. A file rewritten after it was recorded has a new modification
time, so an open hashes just the files whose time differs from the record: a damaged one is
refused, an intact one (a copy that did not keep its times) is answered from, with a note, until
`check` records its time. What the times cannot see is damage that kept them (a disk's own
bit rot, or a time set back by hand): `check` reads every byte for that.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from qtsearch.core.errors import DamagedIndex, UnusableIndex

log = logging.getLogger("qtsearch")

#: The manifest key holding {relative path: {"bytes": n, "sha256": hex, STAMP: ns}}.
FILES = "files"
#: A recorded file's modification time in ns, as `os.stat` gave it when its sha256 was taken.
STAMP = "mtime_ns"
#: Never recorded: the manifest itself, a build's resume state, SQLite's side files (absent or
#: empty in a finished index), temporary names, and the shards a build deletes at its end.
_SKIP_NAMES = {"manifest.json", "state.json"}
_SKIP_SUFFIXES = (".tmp", "-wal", "-shm", "-journal")
_SKIP_DIRS = {"shards"}


def _files(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            if name in _SKIP_NAMES or name.endswith(_SKIP_SUFFIXES):
                continue
            yield Path(root) / name


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _entry(path: Path) -> dict[str, Any]:
    before = path.stat()
    digest = sha256(path)
    return {"bytes": before.st_size, "sha256": digest, STAMP: before.st_mtime_ns}


def record(folder: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """What the manifest records of the finished files in `folder` (written last, by
    write_manifest, so every other file is final)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): _entry(p) for p in _files(folder)}


#: What the manifest's FILES records: {relative path: {"bytes": n, "sha256": hex, STAMP: ns}}.
Recorded = Mapping[str, Mapping[str, Any]]


def check_open(folder: str | os.PathLike, recorded: Recorded) -> None:
    """The check of every open: `check_sizes`, then the sha256 of each file whose modification
    time is not the recorded one (DamagedIndex naming the first that differs; a note when
    they are whole, i.e. copied without their times)."""
    changed = check_sizes(folder, recorded)
    if not changed:
        return
    folder = Path(folder)
    for name in changed:
        problem, _ = _file_problem(folder / name, recorded[name])
        if problem:
            raise DamagedIndex(damaged(folder, [problem]))
    log.warning("%s: %d file(s) changed their modification time since the manifest recorded "
                "them (copied without their times?) and were verified by sha256 on this open; "
                "`qtsearch check %s` records their times, so that opening skips this",
                folder, len(changed), folder)


def verify_and_record(folder: str | os.PathLike, recorded: Recorded, count: int) -> list[str]:
    """`verify`'s problems; when there are none, the modification times of files that changed
    them while staying whole (a copy that did not keep its times) are recorded, so that opens
    no longer hash them (a note where the folder is read-only or a writer is at work)."""
    hashed: dict[str, int] = {}
    problems = verify(folder, recorded, count, hashed)
    if problems:
        return problems
    moved = {name: ns for name, ns in hashed.items()
             if STAMP in recorded[name] and ns != recorded[name][STAMP]}
    if moved:
        from qtsearch.core.errors import QTSearchError

        try:
            _record_times(Path(folder), recorded, moved)
        except (OSError, QTSearchError) as e:
            log.warning("%s: could not record the times of %d file(s) (%s)", folder,
                        len(moved), e)
    return []


def _record_times(folder: Path, recorded: Recorded, moved: Mapping[str, int]) -> None:
    """Record `moved` ({name: its modification time when its sha256 was found to be the
    recorded one}) in the manifest, under the writer lock. A file whose time moved again
    since, or whose record a writer replaced meanwhile, keeps the time it had: nothing is
    hashed twice."""
    from qtsearch.core.config import write_json_atomic
    from qtsearch.index.lock import writer_lock
    from qtsearch.index.names import MANIFEST

    with writer_lock(folder, "qtsearch check"):
        path = folder / MANIFEST
        data = json.loads(path.read_text(encoding="utf-8"))
        files = data.get(FILES) or {}
        for name, ns in moved.items():
            want = files.get(name)
            if (isinstance(want, dict) and want.get("sha256") == recorded[name].get("sha256")
                    and (folder / name).stat().st_mtime_ns == ns):
                want[STAMP] = ns
        write_json_atomic(path, data)


def check_sizes(folder: str | os.PathLike, recorded: Recorded) -> list[str]:
    """The cheap part of every open's check: each file the manifest records (`recorded`) is
    there, readable, with its recorded size (UnusableIndex naming the first that is not). The
    files whose modification time is not the recorded one are returned. Indexes from before
    the record (nothing recorded) pass."""
    folder = Path(folder)
    changed = []
    for name, want in recorded.items():
        path = folder / name
        try:
            st = path.stat()
        except FileNotFoundError:
            raise UnusableIndex(f"{path}: missing (the manifest records it); rebuild the "
                              "index") from None
        except PermissionError:
            raise UnusableIndex(f"{path}: permission denied") from None
        if not os.access(path, os.R_OK):  # else faiss, SQLite and safetensors each blame damage
            raise UnusableIndex(f"{path}: permission denied (this user cannot read it; its owner "
                              "can make it readable with chmod a+r)")
        if stat.S_ISREG(st.st_mode) and st.st_size != want.get("bytes"):
            raise UnusableIndex(f"{path}: {st.st_size:,} bytes where the manifest records "
                              f"{want.get('bytes', 0):,}: damaged or changed since it was "
                              "written; rebuild the index")
        if STAMP in want and st.st_mtime_ns != want[STAMP]:
            changed.append(name)
    return changed


def verify(folder: str | os.PathLike, recorded: Recorded, count: int,
           hashed: dict[str, int] | None = None) -> list[str]:
    """Every problem `qtsearch check` finds, one line each (empty: the index is whole):
    files the manifest records (`recorded`) missing, resized or with another sha256, files
    the record does not list, and counts that disagree with the manifest's `count` (counted
    only where the files they are read from are whole). `hashed`, where given, gets each
    whole file's modification time as it was when its sha256 was taken."""
    folder = Path(folder)
    problems: list[str] = []
    bad: set[str] = set()
    for name, want in recorded.items():
        path = folder / name
        problem, ns = _file_problem(path, want)
        if problem:
            problems.append(problem)
            bad.add(name)
        elif hashed is not None and ns is not None:
            hashed[name] = ns
    if recorded:  # an index from before the record lists nothing
        problems += [f"{p}: not listed in the manifest (not written by qtsearch: move it out "
                     "of the index folder)" for p in _files(folder)
                     if p.relative_to(folder).as_posix() not in recorded]
    if not bad & _vector_files():  # faiss may crash on a damaged file (SQLite says so)
        problems += count_problems(folder, count)
    return problems


def _vector_files() -> set[str]:
    """The files `counts` reads the vectors from."""
    from qtsearch.index.fold import FOLD_FILE
    from qtsearch.index.names import INDEX_FILE

    return {INDEX_FILE, FOLD_FILE}


def _file_problem(path: Path, want: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """(what is wrong with the file at `path` against its record `want`, None when it is
    whole; its modification time when it was hashed, None when it was not)."""
    if not path.is_file():
        return f"{path}: missing", None
    try:
        got = _entry(path)
    except PermissionError:
        return f"{path}: permission denied", None
    if got["bytes"] != want.get("bytes"):
        return (f"{path}: {got['bytes']:,} bytes, the manifest records "
                f"{want.get('bytes', 0):,}", got[STAMP])
    if got["sha256"] != want.get("sha256"):
        return (f"{path}: sha256 {got['sha256'][:12]}… differs from the recorded "
                f"{str(want.get('sha256'))[:12]}… (damaged)", got[STAMP])
    return None, got[STAMP]


def damaged(folder: str | os.PathLike, problems: list[str], unchanged: bool = False) -> str:
    """The one line that tells `problems` (verify's): the first three, and how many more
    (`unchanged`: a writer's, which says it wrote nothing)."""
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return (f"{folder}: damaged: " + "; ".join(problems[:3]) + more +
            ("; nothing was written" if unchanged else "") + "; rebuild the index")


def require_whole(folder: str | os.PathLike, recorded: Recorded, count: int) -> None:
    """What a writer runs before it rewrites an index: the whole `check` (`verify`'s
    arguments), DamagedIndex (one line naming the file) when anything is off. A writer
    records every file's sha256 anew, so writing over damage would make `check` call it
    whole; reading every byte costs about what the working copy's own copy of them does."""
    problems = verify(folder, recorded, count)
    if problems:
        raise DamagedIndex(damaged(folder, problems, unchanged=True))


def counts(folder: Path) -> dict[str, int | None]:
    """Vectors in the faiss index, rows in SQLite, the rows the BM25 files cover and the
    full-text rows of an index built with that table (None: no such files, no such table).
    A graph that holds each distinct vector once counts the rows its fold maps onto them."""
    from qtsearch.index.bm25 import Bm25Index
    from qtsearch.index.faiss_backend import open_faiss_index
    from qtsearch.index.fold import Fold
    from qtsearch.index.names import INDEX_FILE, META_FILE
    from qtsearch.index.store import MetadataStore

    nodes = int(open_faiss_index(folder / INDEX_FILE, mmap=True).ntotal)
    fold = Fold.load(folder, nodes)
    vectors = nodes if fold is None else fold.rows
    with MetadataStore.open(folder / META_FILE) as store:
        rows = store.count()
        fts = None
        if store.has_fts():
            fts = store.fts_count()
    lexical = Bm25Index.open(folder)
    return {"vectors": vectors, "rows": rows,
            "bm25_rows": lexical.count if lexical is not None else None, "full_text_rows": fts}


def count_problems(folder: Path, want: int) -> list[str]:
    """Where the counts (`counts`) differ from the manifest's (`want`)."""
    try:
        got = counts(folder)
    except UnusableIndex as e:
        return [str(e)]
    return [f"{folder}: {what.replace('_', ' ')} {n:,}, the manifest counts {want:,}"
            for what, n in got.items() if n is not None and n != want]
