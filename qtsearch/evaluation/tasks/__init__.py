"""Evaluation tasks, one module per family; each task class registers itself with
`qtsearch.evaluation.harness.register`, and the harness imports every module here."""
