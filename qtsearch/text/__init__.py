"""Text → sentences → tokens: corpus reading, sentence splitting, tokenisation, vocabulary."""

from qtsearch.text.reader import Sentence, read_sentences
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import Vocab

__all__ = ["Sentence", "Vocab", "read_sentences", "tokenize"]
