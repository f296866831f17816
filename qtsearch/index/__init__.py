"""Index folders: manifest I/O, the vector backends (faiss CPU, torch GPU), the metadata
store, the BM25 files, and the choice of index type.

The query layer reaches vectors only through `open_backend` (a `VectorBackend`): nothing
outside this package imports faiss. Also re-exported: `read_manifest`, `open_faiss_index`,
`apply_search_params` (applies the manifest's `index_params`), and the file names.
"""

import importlib
from typing import TYPE_CHECKING, Any

from qtsearch.index.manifest import read_manifest, write_manifest
from qtsearch.index.names import (
    CONFIG_FILE,
    INDEX_FILE,
    INDEX_TYPES,
    MANIFEST,
    META_FILE,
    PARQUET_FILE,
)

if TYPE_CHECKING:
    from qtsearch.index.backend import VectorBackend, open_backend, search_subset
    from qtsearch.index.faiss_backend import (
        apply_search_params,
        gpu_available,
        open_faiss_index,
        threads_for,
    )

#: Re-exports that load faiss and torch (seconds), resolved on first use: reading a manifest
#: (`qtsearch info`, the CLI's checks before a command runs) does not pay for them.
_LAZY = {"VectorBackend": "backend", "open_backend": "backend", "search_subset": "backend",
         "apply_search_params": "faiss_backend", "gpu_available": "faiss_backend",
         "open_faiss_index": "faiss_backend", "threads_for": "faiss_backend"}

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"qtsearch.index.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'qtsearch.index' has no attribute {name!r}")
