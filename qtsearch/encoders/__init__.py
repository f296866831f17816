"""Sentences → vectors behind one protocol (`base.SentenceEncoder`), loaded by one factory
(`registry.load_encoder`): a model folder in torch (`neural`) or numpy (`mean`), or a named
baseline (GloVe, MiniLM, model2vec). `files` reads a model folder without torch; `nn/` holds the
torch networks and their objective; `fast/` the compiled CPU paths of the GRU encoders."""
