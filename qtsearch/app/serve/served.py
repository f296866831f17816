"""The index a server answers from: one `Index` shared by every request thread, replaced whole
when its folder changes on disk.

`add` (here, in another worker process, or `qtsearch add` beside the server) builds the new
index on a copy and renames it into place, so the folder on disk is always a whole index. Each
request takes the current `Index` for its whole life (`use()`), one `stat` of the manifest
tells whether the folder changed since that index was opened, and a changed folder is opened
as a new `Index` (with the same encoder, loaded once) that later requests get; the old one is
closed when its last request ends. So a query during an `add` is answered from the index as it
was, and no request ever sees half of one. Adds are serialised: within the process by a lock,
across processes (worker processes, `qtsearch add` beside the server) by the index's writer
lock (taken by the writers, qtsearch.lifecycle.writers).

The objects an opened index holds live as long as it is served, and a full pass of the cyclic
garbage collector walked them all: 43–61 ms with the interpreter held, about once a second
under load, every request of the worker waiting (the tail of its latencies). `settle_heap`
moves them out of the collector's passes once the server is up, and again after an index is
replaced (docs/serving.md, "Garbage collection").
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qtsearch.core.errors import InputError, QTSearchError
from qtsearch.encoders.neural import Encoder
from qtsearch.lifecycle.facade import Index
from qtsearch.lifecycle.on_disk import MANIFEST, Manifest
from qtsearch.lifecycle.writers import add_to_index, delete_from_index, split_option

log = logging.getLogger("qtsearch")
#: A posted text's file name: letters, digits and . _ - only (it is recorded as its source).
_SOURCE = re.compile(r"[\w.-]{1,100}")

Stamp = tuple[int, int, int, int]
#: How long POST /add and /delete wait for another writer of the index before answering 503.
ADD_WAIT_SECONDS = 30.0


def settle_heap() -> None:
    """Collect what is garbage now, then keep every object alive now out of later collections
    (`gc.freeze`): the served index, its model and the app, which live as long as the server;
    what was frozen before is collected again first (an index replaced since is garbage)."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _stamp(folder: Path) -> Stamp | None:
    """Identity of the folder's manifest (device, inode, mtime, size): a swapped-in index has a
    new one. None while the folder is missing (between the two renames of a swap)."""
    try:
        st = os.stat(folder / MANIFEST)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


@dataclass
class _Entry:
    index: Index
    stamp: Stamp | None
    users: int = 0
    retired: bool = False


def _retire(entry: _Entry) -> None:
    """Close a replaced index after its last request, and collect what it held."""
    entry.index.close()
    settle_heap()


class ServedIndex:
    """An index folder opened for a server (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, open_index: Callable[[Encoder | None], Index],
                 device: str = "cpu"):
        """`open_index(encoder)` opens the folder (None: with its own model, loaded; later,
        the encoder already loaded) and warms it up if it should; `device` embeds adds."""
        self.path = Path(path)
        self.device = device
        self._open = open_index
        stamp = _stamp(self.path)
        self._entry = _Entry(open_index(None), stamp)
        self._lock = threading.Lock()  # guards _entry and every entry's users/retired
        self._reopening = threading.Lock()
        self._adding = threading.Lock()

    @contextlib.contextmanager
    def use(self) -> Iterator[Index]:
        """The current index, kept open for the caller until the block ends."""
        self.refresh()
        with self._lock:
            entry = self._entry
            entry.users += 1
        try:
            yield entry.index
        finally:
            with self._lock:
                entry.users -= 1
                done = entry.retired and entry.users == 0
            if done:
                _retire(entry)

    def current_count(self) -> int | None:
        """The served index's sentence count when it is the folder's current one (one stat,
        no lock: cheap enough for the event loop); None when the folder changed since."""
        entry = self._entry
        stamp = _stamp(self.path)
        # mid-swap (no manifest) the index opened before is the one every request gets
        return len(entry.index) if stamp is None or stamp == entry.stamp else None

    def fresh_count(self) -> int:
        """The sentence count of the folder as it is now (opened again if it changed,
        waiting for a reopening another thread began)."""
        self.refresh(wait=True)
        with self.use() as idx:
            return len(idx)

    def refresh(self, wait: bool = False) -> None:
        """Open the folder again if it changed on disk. One thread reopens while the others go
        on answering from the current index (`wait`: block until this thread may check); a
        folder that cannot be opened (mid-swap, broken) leaves the current index serving."""
        stamp = _stamp(self.path)
        if stamp is None or stamp == self._entry.stamp:
            return
        if not self._reopening.acquire(blocking=wait):
            return
        try:
            if stamp == self._entry.stamp:
                return
            try:
                index = self._open(self._entry.index.encoder)
            except QTSearchError as e:
                log.warning("%s changed on disk but cannot be opened yet (%s); still serving "
                            "the index opened before", self.path, e)
                return
            with self._lock:
                old, self._entry = self._entry, _Entry(index, stamp)
                old.retired = True
                done = old.users == 0
            if done:
                _retire(old)
        finally:
            self._reopening.release()

    def add(self, text: str, source: str = "posted.txt", split_sentences: bool | None = None,
            input_format: str = "auto", allow_duplicates: bool = False,
            upsert: bool = False) -> dict[str, Any]:
        """Append `text` (as a file would hold it) exactly as `qtsearch add` appends a file:
        the text is written to a temporary file named `source`, which add_to_index reads.
        Returns {path, added, count, seconds, note}, `note` saying how the text was split;
        the new sentences are searchable when it returns."""
        if not _SOURCE.fullmatch(source) or source.strip(".") == "":
            raise InputError(f"source {source!r}: a file name of letters, digits, '.', '_' "
                             "and '-' (up to 100), e.g. notes.txt")
        # the index's writer lock (taken in add_to_index) serialises adds across worker
        # processes and with `qtsearch add`/`build-index` beside the server; a writer that
        # holds it longer than ADD_WAIT_SECONDS gets this request a 503 (BusyError)
        with self._adding, tempfile.TemporaryDirectory(prefix="qtsearch-add-") as tmp:
            posted = Path(tmp) / source
            posted.write_text(text, encoding="utf-8")
            split, how = split_option(Manifest.read(self.path), split_sentences, [posted],
                                      input_format)
            result = add_to_index(self.path, [str(posted)], split_sentences=split,
                                  device=self.device,
                                  input_format=input_format, wait=ADD_WAIT_SECONDS,
                                  allow_duplicates=allow_duplicates, upsert=upsert)
            self.refresh(wait=True)
        note = "; ".join([how, *(n.replace(str(posted), source) for n in result.skipped)])
        return {"path": str(result.path), "added": result.added, "count": result.count,
                **({"replaced": result.replaced} if upsert else {}),
                "seconds": round(result.seconds, 3), "note": note}

    def delete(self, doc_ids: list[str], where: dict[str, str | int] | None) -> dict[str, Any]:
        """Delete rows exactly as `qtsearch delete` does (the filter checked against the
        served index's columns); {path, deleted, count, seconds, note}, the rows gone from
        every search when it returns."""
        with self.use() as idx:
            condition = idx.filter_for(where) if where else None
        with self._adding:  # writers of this process one at a time, as for add
            result = delete_from_index(self.path, doc_ids, condition, wait=ADD_WAIT_SECONDS)
            self.refresh(wait=True)
        return {"path": str(result.path), "deleted": result.deleted, "count": result.count,
                "seconds": round(result.seconds, 3), "note": result.note}

    def close(self) -> None:
        with self._lock:
            entry = self._entry
            entry.retired = True
            done = entry.users == 0
        if done:
            entry.index.close()
