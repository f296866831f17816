"""What a query of an opened `Index` takes and gives back, for the shell, the server and
`qtsearch search`: filters, search modes, re-ranking, explanations, hits and their units.

Filters and hits are imported with this module (a command parses `--where` with them before
it opens anything); the names of the engine's own modules (numpy, faiss, the encoders) are
imported on first use, so a malformed `--where` fails before they load.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from qtsearch.core.lazy_names import lazy_names
from qtsearch.search.defaults import MODES
from qtsearch.search.filters import parse_where
from qtsearch.search.hits import UNITS, Hit, Record, Results, first_fetch

if TYPE_CHECKING:
    from qtsearch.encoders.base import SentenceEncoder
    from qtsearch.search.explain import Explainer
    from qtsearch.search.rerank import Reranker
    from qtsearch.search.searcher import CONTEXT_WINDOW

__all__ = ["CONTEXT_WINDOW", "MODES", "UNITS", "Explainer", "Hit", "Record", "Reranker",
           "Results", "first_fetch", "parse_where", "query_encoder"]

#: Where each name of the engine lives.
_LAZY = {"Explainer": "qtsearch.search.explain", "Reranker": "qtsearch.search.rerank",
         "CONTEXT_WINDOW": "qtsearch.search.searcher"}


__getattr__ = lazy_names(__name__, _LAZY)


def query_encoder(model: str | os.PathLike | None = None,
                  device: str = "auto") -> SentenceEncoder:
    """The model (None: the shipped one; or an encoder's name) as `Index.open` loads it for
    queries: pass it as `Index.open(path, model=...)` to open many indexes with one load."""
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.search.searcher import QUERY_PRECISION

    return load_encoder(None if model is None else os.fspath(model), device=device,
                        precision=QUERY_PRECISION)
