"""qtsearch: train Quick-Thoughts sentence encoders, index text with FAISS, search it.

The Python facade: everything a script needs to embed sentences and query an index.

    import qtsearch
    with qtsearch.Index.open("indexes/books") as index:
        hits = index.search("It rained all day.", k=5)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from qtsearch.core.version import __version__

if TYPE_CHECKING:
    from qtsearch.encoders.neural import Encoder
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.search.engine import Hit, Index, Record
    from qtsearch.search.rerank import Reranker

__all__ = ["Encoder", "Hit", "Index", "Record", "Reranker", "__version__", "load_encoder"]

#: Where each name lives. Resolved on first use: `Encoder` pulls in torch, `Index` faiss and the
#: metadata store, and `import qtsearch` (the CLI before it has parsed anything) stays light.
_LAZY = {"Encoder": "qtsearch.encoders.neural", "load_encoder": "qtsearch.encoders.registry",
         "Hit": "qtsearch.search.engine", "Index": "qtsearch.search.engine",
         "Record": "qtsearch.search.engine", "Reranker": "qtsearch.search.rerank"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'qtsearch' has no attribute {name!r}")
