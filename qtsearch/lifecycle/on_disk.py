"""An index folder without opening it for search: its manifest and file names, whether it is
whole, what `info` reports of it, its rows exported.

Numpy-free at import, as commands import it before they parse (`--help` among them); what
needs the metadata store or faiss is imported by the function that reads them, and the checks
of a folder's files and its writers' lock (hashlib, ctypes) on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtsearch.core.lazy_names import lazy_names
from qtsearch.index.manifest import Manifest, read_manifest
from qtsearch.index.names import MANIFEST, META_FILE
from qtsearch.indexing.state import total_seconds

__all__ = ["MANIFEST", "META_FILE", "Manifest", "build_seconds", "check_folder", "counts",
           "damaged", "export_metadata", "folder_bytes", "index_info",
           "read_manifest", "restore_if_missing"]

if TYPE_CHECKING:
    from qtsearch.index.integrity import counts, damaged
    from qtsearch.index.lock import restore_if_missing

__getattr__ = lazy_names(__name__, {
    "counts": "qtsearch.index.integrity", "damaged": "qtsearch.index.integrity",
    "verify_and_record": "qtsearch.index.integrity", "restore_if_missing": "qtsearch.index.lock"})


def index_info(path: str | os.PathLike) -> dict[str, Any]:
    """What `qtsearch info --json` prints of an index folder: the manifest (count, model,
    index type, input files, builds and writes), the folder and its size."""
    from qtsearch.index.index_folder import index_info as info  # numpy, faiss

    return info(Path(path))


def check_folder(path: str | os.PathLike) -> tuple[Manifest, list[str]]:
    """The manifest and the problems `qtsearch check` finds, one line each (none: the index is
    whole): each file against its recorded sha256, and vectors, rows and the manifest's count.
    A whole index gets the times of files copied without them recorded."""
    from qtsearch.index.integrity import verify_and_record

    manifest = Manifest.read(path, hash_changed=False)
    return manifest, verify_and_record(path, manifest.files, manifest.count)


def export_metadata(index: Path, file: Path) -> int:
    """Write the rows of the index folder `index` (text and metadata, no vectors) to the
    Parquet `file`; how many."""
    from qtsearch.index.store import MetadataStore  # numpy, pyarrow

    with MetadataStore.open(index / META_FILE) as store:
        return store.to_parquet(file)


def build_seconds(manifest: Mapping[str, Any]) -> float:
    """A build's own time from its manifest (`read_manifest(path)`): its stages,
    the index and metadata ones counted once where they ran side by side."""
    return total_seconds(manifest["stages"], manifest["build"]["parallel_stages"])


def folder_bytes(path: str | os.PathLike) -> int:
    """The bytes of the files in an index folder."""
    from qtsearch.index.index_folder import folder_bytes as size  # numpy, faiss

    return size(Path(path))
