"""qtsearch: train Quick-Thoughts sentence encoders, index sentences with FAISS, search them."""

from __future__ import annotations

from typing import Any

from qtsearch.encode.encoder import Encoder, load_encoder

__all__ = ["Encoder", "Index", "load_encoder"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # `Index` pulls in faiss and the metadata store: only when asked for, so that
    # `import qtsearch` (and every CLI command that does not query) stays light.
    if name == "Index":
        from qtsearch.query.search import Index

        return Index
    raise AttributeError(f"module 'qtsearch' has no attribute {name!r}")
