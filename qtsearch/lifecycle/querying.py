"""What a query of an opened `Index` takes and gives back, for the shell, the server and
`qtsearch search`: filters, search modes, re-ranking, explanations, hits and their units.

Importing this module loads the engine (numpy, faiss): a command imports it once it has
parsed its arguments and is about to search.
"""

from __future__ import annotations

from qtsearch.search.explain import Explainer
from qtsearch.search.filters import parse_where
from qtsearch.search.hits import UNITS, Hit, Record, Results, first_fetch
from qtsearch.search.rerank import Reranker
from qtsearch.search.searcher import CONTEXT_WINDOW, MODES

__all__ = ["CONTEXT_WINDOW", "MODES", "UNITS", "Explainer", "Hit", "Record", "Reranker",
           "Results", "first_fetch", "parse_where"]
