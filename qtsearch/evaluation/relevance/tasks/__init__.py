"""Relevance tasks, one module per family; each task class registers itself with
`qtsearch.evaluation.relevance.tasks_base.register`, and its registry imports every module
here."""
