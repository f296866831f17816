"""The resume state of a build: `state.json` in `<out>.partial/`, rewritten atomically after every
finished step, so a rerun of the same command knows what it can skip."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic
from qtsearch.core.device import cpus

log = logging.getLogger("qtsearch")

STAGES = ("read", "embed", "index", "metadata")
STATE_FILE = "state.json"
SHARDS = "shards"

#: From this many sentences, on 2 CPUs or more, the metadata stage (SQLite rows, then the BM25
#: files, whose analysis has worker processes of its own) runs in a thread beside the embed and
#: index stages: it takes the core they leave idle in their single-threaded steps
#: (docs/speed.md, "The metadata stage beside the others"). A smaller build runs the stages
#: one after the other: there is little to gain, and a failing write is then always the same
#: stage's.
BESIDE_FROM = 50_000
#: `parallel_stages` in a manifest: the metadata stage ran beside the embed and index stages
#: (True, written by earlier versions: beside the index stage alone; False: one after another).
BESIDE_EMBED = "embed"


def metadata_beside(count: int) -> bool:
    """Whether a build of `count` sentences runs its metadata stage beside the others."""
    return count >= BESIDE_FROM and cpus() >= 2


def total_seconds(stages: dict[str, float], parallel: bool | str | None) -> float:
    """Build time from the stage times of a build whose manifest says `parallel_stages`: a
    stage that ran beside others counts where it outlasted them."""
    read, embed = stages.get("read", 0.0), stages.get("embed", 0.0)
    index, meta = stages.get("index", 0.0), stages.get("metadata", 0.0)
    if parallel == BESIDE_EMBED:
        return read + max(embed + index, meta)
    return read + embed + (max(index, meta) if parallel else index + meta)


@contextmanager
def stage_beside(run: Callable[[threading.Event], None], beside: bool
                 ) -> Iterator[Callable[[], None]]:
    """Run `run(stop)` in a thread beside the block where `beside`, else after it. The block
    gets `check()`, which raises the thread's error once it has failed. Where the block fails
    (Ctrl-C included), `stop` is set (`run` checks it between its steps and raises
    qtsearch.core.errors.Stopped), the thread awaited and its own outcome dropped: the
    block's error is the one to tell."""
    stop = threading.Event()
    if not beside:
        yield lambda: None
        run(stop)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="qtsearch-beside") as pool:
        future = pool.submit(run, stop)

        def check() -> None:
            if future.done():
                future.result()

        try:
            yield check
        except BaseException:
            stop.set()
            wait([future])
            raise
        future.result()


class BuildState(dict):
    """The state as a JSON-shaped dict (stages read and write its keys), with the lock that the
    index and metadata stages share when they run side by side."""

    def __init__(self, partial: Path, **items: Any):
        super().__init__(**items)
        self.partial = partial
        self.lock = threading.Lock()

    def load(self, key: str, requested_index: str, fit: str, parquet_present: bool,
             parquet_wanted: bool) -> list[str]:
        """Reuse `<out>.partial` when it belongs to the same build (same `key`) and return what
        is already done; otherwise start afresh with an empty shards folder."""
        path = self.partial / STATE_FILE
        if path.is_file():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                state = {}
            if state.get("finished") and (
                    state["index"]["requested"] != requested_index
                    or (state.get("transform") or {}).get("requested") != fit
                    or parquet_present != parquet_wanted):
                state = {}  # finished with other options and its shards are gone: redo
            if state.get("key") == key:
                self.clear()
                self.update(state)
                done = ["everything"] if state.get("finished") else []
                if state.get("read"):
                    done.append("read")
                if state.get("embedded"):
                    done.append(f"{len(state['embedded'])} embedded shards")
                if state.get("transform"):
                    done.append("fit")
                if state.get("index"):
                    done.append("index")
                return done
            log.warning("%s: left by a build with other inputs or options; starting afresh",
                        self.partial)
        if self.partial.exists():
            shutil.rmtree(self.partial)
        (self.partial / SHARDS).mkdir(parents=True)
        self.clear()
        self.update({"key": key, "read": None, "embedded": [], "transform": None,
                     "index": None, "stages": dict.fromkeys(STAGES, 0.0)})
        self.save()
        return []

    def save(self) -> None:
        with self.lock:
            write_json_atomic(self.partial / STATE_FILE, dict(self))

    def timed(self, stage: str, start: float) -> None:
        """Add the time since `start` to `stage` and save."""
        with self.lock:
            self["stages"][stage] = round(self["stages"][stage] + time.perf_counter() - start, 3)
        self.save()

    def interrupted(self) -> str:
        """What a rerun of the interrupted build will not redo, and how to rerun it."""
        read = self.get("read")
        if not read:
            return "interrupted while reading the corpus; run the same command again to start over"
        return (f"interrupted; the {read['count']:,} sentences read and "
                f"{len(self['embedded'])} of {read['shards']} embedded shards are kept in "
                f"{self.partial}: run the same command again to continue from there")
