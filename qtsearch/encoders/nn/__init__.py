"""The torch networks a model folder holds (Quick-Thoughts GRU/BoW/MC/Transformer encoders,
FastSent, SDAE, InferSent, mean of words), the QT objective, and a folder's torch I/O."""
