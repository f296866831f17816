"""Relevance tasks, one module per family; each task class registers itself with
`qtsearch.evaluation.relevance.engine.register`, and the engine imports every module here."""
