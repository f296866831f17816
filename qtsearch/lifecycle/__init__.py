"""An index's whole life from Python: build, open, add, delete, upsert, search, check
(`qtsearch.Index`), on top of `indexing/` (the writers) and `search/` (the engine)."""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from qtsearch.core.lazy_names import lazy_names as _lazy_names

if _TYPE_CHECKING:
    from qtsearch.lifecycle.facade import Index
    from qtsearch.search.fusion import SearchSettings
    from qtsearch.search.hits import Hit, Record, Results
    from qtsearch.search.rerank import Reranker

__all__ = ["Hit", "Index", "Record", "Reranker", "Results", "SearchSettings"]

#: `Index` and the value types its calls take and give, imported on first use (the engine
#: pulls in numpy and faiss; importing one lifecycle module should not for a name it skips).
_LAZY = {"Index": "qtsearch.lifecycle.facade", "SearchSettings": "qtsearch.search.fusion",
         "Hit": "qtsearch.search.hits", "Record": "qtsearch.search.hits",
         "Results": "qtsearch.search.hits", "Reranker": "qtsearch.search.rerank"}


__getattr__ = _lazy_names(__name__, _LAZY)
