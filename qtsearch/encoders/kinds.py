"""The names of the encoders qtsearch trains and of the pretrained word vectors they start from,
without torch or numpy: the training configs check their options against these before the
heavy libraries load, and the CLI's help lists them. The torch modules map the same names to
their classes (tests/training/test_config_defaults.py checks that the two agree)."""

from __future__ import annotations

#: The Quick-Thoughts sentence encoders (encoders/nn/quick_thoughts.ENCODERS), the default first.
QT_ENCODERS = ("uni", "bi", "bow", "mc", "transformer")
#: The encoders of the pair trainers: NLI, paraphrases, multi-task (encoders/nn/folder.PAIR_MODELS).
PAIR_ENCODERS = ("infersent", "mean")
#: --word-vectors: name → width of its vectors (encoders/pretrained.WORD_VECTORS).
WORD_VECTOR_DIMS = {"glove": 50, "model2vec": 256}
