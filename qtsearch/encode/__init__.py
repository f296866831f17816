"""Sentence encoders behind one protocol: our trained models (`encoder`), baselines and encoders
loaded by name (GloVe, MiniLM, random in `baselines`; model2vec in `static`), pretrained GloVe
vectors (`pretrained`). `encoder.load_encoder` takes a model folder or one of those names.
"""
