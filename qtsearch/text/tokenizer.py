"""Word tokenisation with BlingFire: punctuation and clitics become tokens ("don't" → do n't),
case is kept (the vocabulary is case-sensitive, as in the paper)."""

from __future__ import annotations

import re

import blingfire

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """Lone surrogates (undecodable bytes of argv or stdin under surrogateescape) become
    U+FFFD: BlingFire needs valid UTF-8. Same length, so character offsets stay valid."""
    return _SURROGATE.sub("\ufffd", text)


def tokenize(text: str) -> list[str]:
    if not text:
        return []
    return blingfire.text_to_words(scrub(text)).split()
