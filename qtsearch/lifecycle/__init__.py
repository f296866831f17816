"""An index's whole life from Python: build, open, add, delete, upsert, search, check
(`qtsearch.Index`), on top of `indexing/` (the writers) and `search/` (the engine)."""
