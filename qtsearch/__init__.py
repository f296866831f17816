"""qtsearch: train Quick-Thoughts sentence encoders, index text with FAISS, search it.

The Python API: an index's whole life through `Index`, and the encoders.

    import qtsearch
    with qtsearch.Index.build(["It rained all day.", "The sun came out."], "indexes/notes",
                              overwrite=True) as index:
        results = index.search("a wet afternoon", k=5)
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from qtsearch.core.lazy_names import lazy_names as _lazy_names
from qtsearch.core.version import __version__

if _TYPE_CHECKING:
    from qtsearch.encoders.base import SentenceEncoder
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.indexing.build_config import IndexConfig
    from qtsearch.lifecycle.facade import Index
    from qtsearch.search.hits import Hit, Record, Results
    from qtsearch.search.rerank import Reranker

__all__ = ["Hit", "Index", "IndexConfig", "Record", "Reranker", "Results", "SentenceEncoder",
           "__version__", "load_encoder"]

#: Where each name lives, imported on first use: `Index` pulls in faiss and the metadata
#: store, a torch model torch, and `import qtsearch` (the CLI before it has parsed anything)
#: stays light.
_LAZY = {"Index": "qtsearch.lifecycle.facade", "Hit": "qtsearch.search.hits",
         "Record": "qtsearch.search.hits", "Results": "qtsearch.search.hits",
         "IndexConfig": "qtsearch.indexing.build_config", "Reranker": "qtsearch.search.rerank",
         "SentenceEncoder": "qtsearch.encoders.base", "load_encoder": "qtsearch.encoders.registry"}


__getattr__ = _lazy_names(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
