"""Labelled sentence pairs for supervised training: NLI (SNLI/MultiNLI) and paraphrase pairs."""
