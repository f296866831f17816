"""The index a relevance task is searched through: its pool written as a one-sentence-per-line
corpus and built as `Index.build` (and `qtsearch build-index POOL --model M`) would.

Built indexes are cached under `$QTSEARCH_CACHE/relevance/` per task, pool and encoder
fingerprint, and also per build code (a hash of the code that turns text into an index:
qtsearch/text, models, inference, encode, build and index): a rerun searches the same index
without embedding again, and a change to how sentences are tokenised, encoded or indexed
rebuilds them instead of scoring a stale one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from functools import cache
from pathlib import Path
from typing import Any

from qtsearch.core.errors import QTSearchError, UnusableIndex
from qtsearch.core.paths import cache_dir, code_key
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import SentenceEncoder
from qtsearch.evaluation.relevance.tasks_base import RelevanceTask
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.on_disk import Manifest
from qtsearch.lifecycle.writers import build_folder

#: The folders of qtsearch whose code decides an index's vectors and contents.
BUILD_CODE = ("text", "encoders", "index", "indexing")


@cache
def build_code_key() -> str:
    """The key of the code from text to index (an encoder fix once left cached indexes of its
    old vectors in place)."""
    return code_key(BUILD_CODE)


def pool_file(task: RelevanceTask) -> Path:
    """The task's pool as a corpus file (one sentence a line; row i of the pool is line i+1
    and so index id i), written once per distinct pool."""
    text = "".join(f"{s}\n" for s in task.pool)
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    path = cache_dir("relevance", "pools") / f"{task.name}-{digest}.txt"
    if not path.is_file():
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return path


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "model"


def encoder_key(encoder: Any) -> str:
    """What identifies an encoder's index of a pool: its vectors (fingerprint) and the search
    settings its folder records (they choose the fitted transform)."""
    return f"{encoder.fingerprint}|{json.dumps(encoder.search, sort_keys=True)}"


def task_index(task: RelevanceTask, model: str | None, name: str, fingerprint: str,
               device: str = "auto", rebuild: bool = False,
               reporter: Reporter | None = None) -> tuple[Path, bool]:
    """(index folder, whether it was built now) for the task's pool with `model` (a model
    folder, an encoder name, or None for the shipped model)."""
    corpus = pool_file(task)
    stem = f"{task.name}-{_slug(name)}"
    key = hashlib.sha256(f"{corpus.name}|{fingerprint}|{build_code_key()}".encode())
    folder = cache_dir("relevance", "indexes") / f"{stem}-{key.hexdigest()[:16]}"
    if not rebuild and _usable(folder, len(task.pool)):
        return folder, False
    for old in folder.parent.glob(f"{stem}-*"):  # earlier builds of this task and model
        if old.name != folder.name and not old.name.endswith(".partial"):
            shutil.rmtree(old, ignore_errors=True)
    build_folder(corpus, folder, model, reporter=reporter, device=device, overwrite=True)
    return folder, True


def open_task_index(task: RelevanceTask, encoder: SentenceEncoder, model: str | None,
                    device: str = "auto", rebuild: bool = False,
                    reporter: Reporter | None = None) -> tuple[Index, bool]:
    """(the task's index opened with `encoder`, whether it was built now): `encoder` is
    `model` loaded by `query_encoder`, so that each task's index opens without loading it again;
    an index built now is checked row by row against the pool before any query."""
    folder, built = task_index(task, model, encoder.name, encoder_key(encoder), device, rebuild,
                               reporter)
    index = Index.open(folder, model=encoder, device=device)
    if built:
        try:
            check_rows(index, task)
        except UnusableIndex:
            index.close()
            raise
    return index, built


def _usable(folder: Path, count: int) -> bool:
    try:
        return Manifest.read(folder).count == count
    except QTSearchError:
        return False


def check_rows(index: Index, task: RelevanceTask) -> None:
    """Every index id must hold the pool sentence of the same row: the scores rely on it."""
    if [r.text for r in index.get(range(len(index)))] != task.pool:
        raise UnusableIndex(f"{index.path}: the index rows differ from the {task.name} pool "
                            "(the reader changed a sentence); delete the folder and rerun")
