"""Index folders: manifest I/O, the vector backends (faiss CPU, torch GPU), the metadata and
full-text store, and the choice of index type.

The query layer reaches vectors only through `open_backend` (a `VectorBackend`): nothing
outside this package imports faiss. Also re-exported: `read_manifest`, `open_faiss_index`,
`apply_search_params` (applies the manifest's `index_params`), and the file names.
"""

from qtsearch.index.backend import VectorBackend, open_backend, search_subset
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
    "VectorBackend",
    "apply_search_params",
    "gpu_available",
    "open_backend",
    "open_faiss_index",
    "read_manifest",
    "search_subset",
    "threads_for",
    "write_manifest",
]
