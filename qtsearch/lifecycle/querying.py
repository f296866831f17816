"""What a query of an opened `Index` takes and gives back, for the shell, the server and
`qtsearch search`: filters, search modes, re-ranking, explanations, hits and their units.

Filters and hits are imported with this module (a command parses `--where` with them before
it opens anything); the names of the engine's own modules (numpy, faiss, the encoders) are
imported on first use, so a malformed `--where` fails before they load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from qtsearch.search.filters import parse_where
from qtsearch.search.hits import UNITS, Hit, Record, Results, first_fetch

if TYPE_CHECKING:
    from qtsearch.search.explain import Explainer
    from qtsearch.search.rerank import Reranker
    from qtsearch.search.searcher import CONTEXT_WINDOW, MODES

__all__ = ["CONTEXT_WINDOW", "MODES", "UNITS", "Explainer", "Hit", "Record", "Reranker",
           "Results", "first_fetch", "parse_where"]

#: Where each name of the engine lives.
_LAZY = {"Explainer": "qtsearch.search.explain", "Reranker": "qtsearch.search.rerank",
         "CONTEXT_WINDOW": "qtsearch.search.searcher", "MODES": "qtsearch.search.searcher"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
