"""Index folder helpers shared by builds, derived builds, `add` and `delete`: input checksums,
size on disk, the working copy a writer changes and the atomic swap of a finished folder into
place, and what `info` and `serve` report."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qtsearch.core.disk import NO_SPACE, no_space, read_only_part, remove_tree
from qtsearch.core.errors import InputError, Interrupted, OutputError, UnusableIndex
from qtsearch.index import bm25
from qtsearch.index.lock import swap_in
from qtsearch.index.manifest import Manifest
from qtsearch.index.names import META_FILE
from qtsearch.index.store import MetadataStore

__all__ = ["file_checksum", "folder_bytes", "index_info", "require_writable",
           "swap_in",  # swap_in: index.lock
           "working_copy"]


def file_checksum(path: Path) -> dict[str, Any]:
    """An input file's path, size and sha256 (the manifest records them); a file that cannot
    be read is the input's fault (InputError, exit 3), not the output's."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})") from e
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": h.hexdigest()}


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def index_info(path: Path) -> dict[str, Any]:
    """The manifest of an index folder plus where it is and its size on disk: what
    `qtsearch info --json` prints and `qtsearch serve` answers at /info."""
    manifest = Manifest.read(path)
    with MetadataStore.open(Path(path) / META_FILE) as store:
        full_text = store.has_fts()
        rows = store.count()  # reads the table: damage and a short table show here
    if rows != manifest.count:
        raise UnusableIndex(f"{path}: the manifest counts {manifest.count:,} sentences but "
                          f"the metadata holds {rows:,} rows; rebuild the index")
    return {"kind": "index", "path": str(path), **manifest.to_dict(),
            "transform": manifest.transform or "none (the encoder's own vectors)",
            "full_text": full_text, "bm25": bm25.exists(Path(path)),
            "bytes_on_disk": folder_bytes(Path(path))}


def require_writable(folder: Path) -> None:
    """Refuse, before any work, to replace an index that holds a read-only file or folder: the
    copy would inherit its mode and the old folder could not be deleted, so the write would
    fail half-way and leave a work folder behind."""
    part = read_only_part(folder)
    if part is None:
        return
    fix = f"the index is unchanged (make it writable to change it: chmod -R u+w {folder})"
    if part == folder:
        raise OutputError(f"{folder}: the index folder is read-only; {fix}")
    what = "folder" if part.is_dir() else "file"
    raise OutputError(f"{part}: a read-only {what} in the index {folder}; {fix}")


@contextlib.contextmanager
def working_copy(folder: Path) -> Iterator[Path]:
    """`NAME.adding`, a copy of the index folder for a writer to change and then swap in
    (after the block); the copy is removed when the block fails, so the index is unchanged
    (Ctrl-C: Interrupted, saying so). A read-only index is refused before it is copied."""
    require_writable(folder)
    work = folder.with_name(folder.name + ".adding")
    remove_tree(work)  # a killed writer's (the lock's `restore` removes it too)
    try:
        shutil.copytree(folder, work)
    except OSError as e:  # shutil.Error (a list of failed files) or a plain OSError
        with contextlib.suppress(OSError):
            remove_tree(work)
        raise copy_failure(work, e) from None
    try:
        yield work
    except BaseException as e:
        with contextlib.suppress(OSError):
            remove_tree(work)
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted(f"interrupted; {folder} is unchanged") from None
        raise


def copy_failure(work: Path, error: OSError) -> OutputError:
    """Why the working copy could not be made, in one line (the disk is full, most often)."""
    first = error.args[0][0] if isinstance(error, shutil.Error) and error.args and \
        isinstance(error.args[0], list) and error.args[0] else None
    why = str(first[2]) if first else (error.strerror or str(error))
    if no_space(error):  # also a shutil.Error's list of failed files, by its text
        why = NO_SPACE
    return OutputError(f"{work}: cannot make the working copy of the index ({why}); the index "
                       "is unchanged")
