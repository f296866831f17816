"""Word tokenisation with BlingFire: punctuation and clitics become tokens ("don't" → do n't),
case is kept (the vocabulary is case-sensitive, as in the paper)."""

from __future__ import annotations

import blingfire


def tokenize(text: str) -> list[str]:
    if not text:
        return []
    return blingfire.text_to_words(text).split()
