"""Training: every run's options (configs/, without torch: the CLI reads its defaults there),
one loop (loop.py) with its checkpoint, metrics and progress, the tasks it trains (objectives/:
ordered text for QT, FastSent and the SDAE; NLI; paraphrase pairs; a teacher) and one module
per trainer that assembles them (trainer.py, nli_trainer.py, pairs_trainer.py, multitask.py,
adapt_trainer.py)."""
