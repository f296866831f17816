"""Index folder helpers shared by builds, derived builds and `add`: input checksums, size on
disk, the atomic swap of a finished folder into place, and what `info` and `serve` report."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from qtsearch.core.errors import IndexError_
from qtsearch.index import bm25
from qtsearch.index.lock import swap_in
from qtsearch.index.manifest import read_manifest
from qtsearch.index.names import META_FILE
from qtsearch.index.store import MetadataStore

__all__ = ["file_checksum", "folder_bytes", "index_info", "swap_in"]  # swap_in: index.lock


def file_checksum(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return {"path": str(path), "bytes": path.stat().st_size, "sha256": h.hexdigest()}


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def index_info(path: Path) -> dict[str, Any]:
    """The manifest of an index folder plus where it is and its size on disk: what
    `qtsearch info --json` prints and `qtsearch serve` answers at /info."""
    manifest = read_manifest(path)
    with MetadataStore.open(Path(path) / META_FILE) as store:
        full_text = store.has_fts()
        rows = store.count()  # reads the table: damage and a short table show here
    if rows != manifest["count"]:
        raise IndexError_(f"{path}: the manifest counts {manifest['count']:,} sentences but "
                          f"the metadata holds {rows:,} rows; rebuild the index")
    return {"kind": "index", "path": str(path), **manifest,
            "transform": manifest.get("transform") or "none (the encoder's own vectors)",
            "full_text": full_text, "bm25": bm25.exists(Path(path)),
            "bytes_on_disk": folder_bytes(Path(path))}
