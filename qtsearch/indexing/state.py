"""The resume state of a build: `state.json` in `<out>.partial/`, rewritten atomically after every
finished step, so a rerun of the same command knows what it can skip."""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic

log = logging.getLogger("qtsearch")

STAGES = ("read", "embed", "index", "metadata")
STATE_FILE = "state.json"
SHARDS = "shards"

#: The metadata stage runs beside the index stage only with this many CPUs: on fewer, a Python
#: thread next to faiss's OpenMP threads oversubscribes the cores and slows both.
PARALLEL_MIN_CPUS = 4


def total_seconds(stages: dict[str, float], parallel: bool | None = None) -> float:
    """Build time from the stage times; the index and metadata stages overlap on machines
    with PARALLEL_MIN_CPUS or more (`parallel`: whether they did; default: this machine)."""
    if parallel is None:
        parallel = (os.cpu_count() or 1) >= PARALLEL_MIN_CPUS
    index, meta = stages.get("index", 0.0), stages.get("metadata", 0.0)
    return (stages.get("read", 0.0) + stages.get("embed", 0.0)
            + (max(index, meta) if parallel else index + meta))


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
