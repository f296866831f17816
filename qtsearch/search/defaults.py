"""The search defaults the CLI shows, importable without numpy or the encoders: the commands
read them here, so that `qtsearch search --help` starts fast and shows what the library does."""

from __future__ import annotations

#: The search modes of `Index.search(mode=...)` and `qtsearch search --mode`.
MODES = ("hybrid", "semantic", "lexical")

#: Results per query: `Index.search`, `qtsearch search -k`, the shell, the HTTP API.
TOP_K = 10

#: Queries of one search up to this many are each searched alone by the vector index, so that a
#: query answers the same asked alone or beside others (the server merges up to this many
#: requests); a larger batch goes to faiss whole, for its threads (or GPU) over the queries,
#: whose batch kernels round otherwise (qtsearch.index.backend.search_each).
ALONE_UP_TO = 16

#: First-stage hits re-scored per query, chosen on the relevance benchmark (docs/benchmarks.md,
#: "Re-ranking"): MiniLM re-ranking the default hybrid hits scored mean paraphrase MRR@10 0.915
#: at depth 30 and at 10, TREC P@10 0.507 at 30 against 0.483 at 10.
RERANK_DEPTH = 30

#: The re-ranker's share of a re-ranked hit's score, the first stage's the rest (each a z-score
#: over the re-ranked hits), chosen on answer retrieval and the paraphrase sets together
#: (docs/benchmarks.md, "Re-ranking with a stronger encoder").
RERANK_WEIGHT = 0.6
