"""Training tasks (see `qtsearch.training.loop.Task`): ordered text (QT, FastSent, SDAE), NLI
and paraphrase pairs."""
