"""Training: one loop (loop.py) with its checkpoint, metrics and progress, the tasks it trains
(tasks/: ordered text for QT, FastSent and the SDAE; NLI; paraphrase pairs) and one module per
trainer that assembles them (trainer.py, nli.py, pairs.py, multitask.py)."""
