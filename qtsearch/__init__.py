"""qtsearch: train Quick-Thoughts sentence encoders, index sentences with FAISS, search them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qtsearch.encode.encoder import Encoder, load_encoder
    from qtsearch.query.rerank import Reranker
    from qtsearch.query.search import Index

__all__ = ["Encoder", "Index", "Reranker", "load_encoder"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # `Encoder` pulls in torch, `Index` faiss and the metadata store: only when asked for, so
    # that `import qtsearch` (the CLI before it has parsed anything) stays light.
    if name in ("Encoder", "load_encoder"):
        from qtsearch.encode import encoder

        return getattr(encoder, name)
    if name == "Index":
        from qtsearch.query.search import Index

        return Index
    if name == "Reranker":
        from qtsearch.query.rerank import Reranker

        return Reranker
    raise AttributeError(f"module 'qtsearch' has no attribute {name!r}")
