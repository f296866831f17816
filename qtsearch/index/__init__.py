"""Index folders: manifest I/O, faiss CPU/GPU backend, and the choice of index type.

What the query layer needs is re-exported here: `read_manifest`, `open_faiss_index`,
`apply_search_params` (applies the manifest's `index_params`), and the file names.
"""

from qtsearch.index.faiss_backend import (
    apply_search_params,
    gpu_available,
    open_faiss_index,
    threads_for,
)
from qtsearch.index.manifest import (
    CONFIG_FILE,
    INDEX_FILE,
    INDEX_TYPES,
    MANIFEST,
    META_FILE,
    PARQUET_FILE,
    read_manifest,
    write_manifest,
)

__all__ = [
    "CONFIG_FILE",
    "INDEX_FILE",
    "INDEX_TYPES",
    "MANIFEST",
    "META_FILE",
    "PARQUET_FILE",
    "apply_search_params",
    "gpu_available",
    "open_faiss_index",
    "read_manifest",
    "threads_for",
    "write_manifest",
]
