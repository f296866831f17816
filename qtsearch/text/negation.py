"""Negated copies of sentences, as hard negatives that teach an encoder what "not" does.

A mean of word vectors trained on paraphrases alone puts "A man is playing a guitar" and "A
man is not playing a guitar" at cosine 0.94 (all-MiniLM-L6-v2: 0.70): nothing in caption pairs
says that one word can reverse a sentence. Giving a pair the negated copy of its positive as
its hard negative does: the anchor must score the positive above a sentence that differs from
it only by the negation. Three rules fit about three in four Multi30k captions; a sentence
that already holds a negation, or that no rule fits, gets none.

Negation scopes (`word_roles`, `in_scope`) are what the mean encoder's `negation_scope` reads
(qtsearch.encoders.nn.mean_words): the tokens after a cue, up to the next scope end.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # training data: a query, which reads scopes alone, never imports its readers
    from qtsearch.text.datasets.paraphrase_data import Pair

#: Tokens that open a negation's scope (as the tokeniser gives them: "isn't" -> "is", "n't";
#: "cannot" -> "can", "not"), and tokens that close it; a sentence's end closes it too.
CUES = frozenset({"not", "no", "n't", "never", "nobody", "nothing", "none", "neither", "nor",
                  "without"})
SCOPE_ENDS = frozenset({",", ".", ";", ":", "!", "?", "but"})
#: A vocabulary word's role in negation scopes.
PLAIN, CUE, END = 0, 1, 2

#: A sentence already negated (any cue; "n't" ends a word rather than standing alone)
_NEGATED = re.compile(r"\b(?:" + "|".join(sorted(CUES - {"n't"})) + r")\b|n't\b", re.IGNORECASE)
#: "There is a dog …" -> "There is no dog …"
_THERE = re.compile(r"^(there\s+(?:is|are|was|were)\s+)(?:a|an|some)\b", re.IGNORECASE)
#: "A man is playing …" -> "A man is not playing …" (the first auxiliary after the first word:
#: "Is it raining?" is a question, left alone)
_AUX = re.compile(r"\b(is|are|was|were)\b(?=\s+\w)", re.IGNORECASE)
#: "A man riding a wave …" -> "There is no man riding a wave …"
_ARTICLE = re.compile(r"^an?\s+(?=\w)", re.IGNORECASE)


def negate(sentence: str) -> str | None:
    """The sentence negated by the first rule that fits, or None."""
    text = sentence.strip()
    if not text or _NEGATED.search(text):
        return None
    if m := _THERE.match(text):
        return f"{m.group(1)}no{text[m.end():]}"
    if m := next((m for m in _AUX.finditer(text) if m.start() > 0), None):
        return f"{text[:m.end()]} not{text[m.end():]}"
    if m := _ARTICLE.match(text):
        return f"There is no {text[m.end():]}"
    return None


def with_negations(pairs: Iterable[Pair], held: AbstractSet[str]) -> tuple[list[Pair], int, int]:
    """(the pairs, each without a hard negative given its positive's negation; how many got
    one; how many negations were not used because they are a sentence of `held`, the
    normalised evaluation sentences that training must never see)."""
    from qtsearch.text.datasets.paraphrase_data import normalise

    out, added, held_back = [], 0, 0
    for p in pairs:
        negated = negate(p.positive) if p.negative is None else None
        if negated is not None and normalise(negated) in held:
            held_back += 1
        elif negated is not None:
            p = dataclasses.replace(p, negative=negated)
            added += 1
        out.append(p)
    return out, added, held_back


def word_roles(words: Sequence[str]) -> np.ndarray:
    """Each vocabulary word's role (PLAIN, CUE or END, in any casing), as float32: the mean
    encoder keeps it among its weights."""
    def role(word: str) -> int:
        w = word.lower()
        return CUE if w in CUES else END if w in SCOPE_ENDS else PLAIN

    return np.array([role(w) for w in words], dtype=np.float32)


def in_scope(roles: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Whether each token of concatenated sentences (their roles; each sentence starts at an
    index of `starts`) lies in a negation's scope: after a cue of its sentence, before the next
    scope end. The same as `qtsearch.encoders.nn.mean_words.in_scope` over a padded batch."""
    cue = (roles == CUE).astype(np.int64)
    cues = np.cumsum(cue)
    before = cues - cue  # cues before each token
    closed = np.where(roles == END, cues, 0)  # cues closed at each end...
    closed[starts] = np.maximum(closed[starts], before[starts])  # ...and before each sentence
    return before - np.maximum.accumulate(closed) > 0
