"""Query words the model does not know, and the one line that says so.

A model knows a fixed vocabulary; a French or Russian query to an English model is mostly
unknown words, and its vector is noise that still ranks sentences with confident scores. Such
a query is flagged rather than silently answered: hybrid search drops its semantic leg (the
lexical leg matches any words), semantic search says its results are unreliable. A model
with an open vocabulary (qtsearch.encoders.pieces) knows every word it can cut into pieces it
has vectors for: its queries keep their semantic leg, and a note names the composed words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from qtsearch.core.errors import InputError, UsageError
from qtsearch.encoders.base import TokenEncoder
from qtsearch.text.tokenizer import tokenize

if TYPE_CHECKING:
    from qtsearch.encoders.open_vocab import OpenVocab

#: A query is "mostly unknown" when more than this share of its words is unknown.
UNKNOWN_SHARE = 0.5
#: A query leans on composed words when at least this share of its words is composed ("What
#: causes anemia?"; not one rare word in a long sentence, which its other words carry).
COMPOSED_SHARE = 0.3


class KnowsWords(Protocol):
    def known_words(self, text: str) -> int: ...


def words_of(text: str) -> list[str]:
    """The words of `text`: its tokens with a letter or digit (punctuation is no word)."""
    return [t for t in tokenize(text) if any(c.isalnum() for c in t)]


def unknown_words(encoder: KnowsWords, text: str) -> list[str]:
    """The words of `text` (`words_of`) that `encoder` does not know."""
    words = words_of(text)
    if encoder.known_words(" ".join(words)) >= len(words):  # the common case: one call
        return []
    return [w for w in words if encoder.known_words(w) == 0]


def vocabulary(encoder: object) -> list[str]:
    """The words of a model with a vocabulary of its own (none for MiniLM's word pieces)."""
    return list(encoder.vocab.words) if isinstance(encoder, TokenEncoder) else []


def composed_words(encoder: object, text: str) -> list[str]:
    """The words of `text` outside the model's table that it composes from word pieces (a
    mean model with an open vocabulary, qtsearch.encoders.pieces; none for any other)."""
    # not isinstance(encoder, TokenEncoder): a runtime Protocol check walks the protocol's
    # members at every call on Python 3.11, a noticeable part of a query's notes
    open_vocab: OpenVocab | None = getattr(encoder, "open_vocab", None)
    if open_vocab is None:
        return []
    return [t for t in words_of(text) if open_vocab.is_composed(t)]


def composed_note(encoder: object, text: str, mode: str) -> str | None:
    """The line for a query that leans on composed words (COMPOSED_SHARE): their vectors are
    approximations (a held-out known word's composed row is at cosine ~0.5 to its trained
    one), so a reader knows why a semantic hit may miss. None in lexical mode, which reads
    words as typed."""
    composed = composed_words(encoder, text) if mode != "lexical" else []
    if not composed:  # nearly every query: its words need not be counted
        return None
    words = words_of(text)
    if len(composed) < COMPOSED_SHARE * len(words):
        return None
    shown = ", ".join(composed[:5]) + (", …" if len(composed) > 5 else "")
    are, their = ("is", "its vector is") if len(composed) == 1 else ("are", "their vectors are")
    return (f"{len(composed)} of the {len(words)} words of {text!r} {are} not in the model's "
            f"vocabulary; {their} composed from word pieces ({shown})")


def query_text(sentence: str) -> str:
    """A query's text, stripped; refused when it is not a string or is empty."""
    if not isinstance(sentence, str):
        raise UsageError(f"a query must be a string, not {type(sentence).__name__}")
    text = sentence.strip()
    if not text:
        raise InputError("empty query: type a sentence")
    return text


def note_for(text: str, unknown: list[str], mode: str) -> str | None:
    """The warning for a query most of whose words are unknown, or None."""
    if not unknown:
        return None
    words = words_of(text)
    if len(unknown) <= UNKNOWN_SHARE * len(words):
        return None
    shown = ", ".join(unknown[:5]) + (", …" if len(unknown) > 5 else "")
    what = ("searched by its words only (lexical)" if mode == "hybrid"
            else "its semantic results are unreliable")
    return (f"{len(unknown)} of the {len(words)} words of {text!r} are unknown to the model "
            f"({shown}): {what}")

