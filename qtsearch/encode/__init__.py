"""Sentence encoders behind one protocol: our trained models (`encoder`), baselines (GloVe, MiniLM,
random), pretrained GloVe vectors.
"""
