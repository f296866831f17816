"""What a long-lived caller (the shell, the server, `qtsearch search`) queries an opened index
with: the engine (`Searcher`, the object `Index` wraps) and the parts a query takes and gives
back: filters, re-ranking, explanations, hits and their units.

Importing this module loads the engine (numpy, faiss): a command imports it once it has
parsed its arguments and is about to search.
"""

from __future__ import annotations

from qtsearch.search.explain import Explainer
from qtsearch.search.filters import parse_where
from qtsearch.search.hits import UNITS, Hit, Record, Results, first_fetch
from qtsearch.search.rerank import Reranker
from qtsearch.search.searcher import CONTEXT_WINDOW, MODES, Searcher

__all__ = ["CONTEXT_WINDOW", "MODES", "UNITS", "Explainer", "Hit", "Record", "Reranker",
           "Results", "Searcher", "first_fetch", "parse_where"]
