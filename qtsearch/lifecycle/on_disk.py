"""An index folder without opening it for search: its manifest and file names, whether it is
whole, what `info` reports of it, its rows exported.

Numpy-free at import, as commands import it before they parse; what needs the metadata store
or faiss is imported by the function that reads them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from qtsearch.index.integrity import counts, damaged, verify_and_record
from qtsearch.index.lock import restore_if_missing
from qtsearch.index.manifest import Manifest, read_manifest
from qtsearch.index.names import MANIFEST, META_FILE

__all__ = ["MANIFEST", "META_FILE", "Manifest", "check_folder", "counts", "damaged",
           "export_metadata", "index_info", "read_manifest", "restore_if_missing"]


def index_info(path: str | os.PathLike) -> dict[str, Any]:
    """What `qtsearch info --json` prints of an index folder: the manifest (count, model,
    index type, input files, builds and writes), the folder and its size."""
    from qtsearch.index.index_folder import index_info as info  # numpy, faiss

    return info(Path(path))


def check_folder(path: str | os.PathLike) -> tuple[Manifest, list[str]]:
    """The manifest and the problems `qtsearch check` finds, one line each (none: the index is
    whole): each file against its recorded sha256, and vectors, rows and the manifest's count.
    A whole index gets the times of files copied without them recorded."""
    manifest = Manifest.read(path, hash_changed=False)
    return manifest, verify_and_record(path, manifest.files, manifest.count)


def export_metadata(index: Path, file: Path) -> int:
    """Write the rows of the index folder `index` (text and metadata, no vectors) to the
    Parquet `file`; how many."""
    from qtsearch.index.store import MetadataStore  # numpy, pyarrow

    with MetadataStore.open(index / META_FILE) as store:
        return store.to_parquet(file)
