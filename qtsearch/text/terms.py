"""Text → BM25 terms: words are letters and digits, case-folded, diacritics removed, English
stop-words dropped (qtsearch.text.stopwords) and Snowball-stemmed (PyStemmer). The BM25 files
(qtsearch.index.bm25) are written and searched through it, and the lexical leg cuts queries
into words with the same pattern."""

from __future__ import annotations

import re
import threading
import unicodedata

import Stemmer

from qtsearch.text.stopwords import STOP_WORDS
from qtsearch.text.token_table import TokenTable, split_table

#: A word: a run of letters and digits.
WORD = re.compile(r"[^\W_]+")
#: WORD's words of an ASCII text, case-folded, as one translation and a split: letters and
#: digits lower-cased, every other character a space (a third less time than the pattern
#: over a build's millions of rows).
ASCII_WORDS = str.maketrans({c: c.lower() if c.isalnum() else " " for c in map(chr, range(128))})
#: ASCII_WORDS over UTF-8 bytes: bytes past ASCII (the UTF-8 of words WORD found) kept.
BYTE_WORDS = bytes(ord(ASCII_WORDS[c]) for c in range(128)) + bytes(range(128, 256))
#: Distinct words whose terms a query-time analyzer remembers (a build's remembers them all).
CACHE_WORDS = 2_000_000
_UNSEEN = ""  # no word is empty


def _fold(word: str) -> str:
    """A case-folded word without diacritics ("café" and "cafe" are one term, as in FTS5)."""
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFKD", word)
                   if not unicodedata.combining(c))


class Analyzer:
    """Text → terms: words, stop-words out, Snowball stems; each distinct word is stemmed once
    and remembered (a dict lookup a token after that)."""

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("english")
        self._terms: dict[str, str | None] = {}  # word -> term (None: a stop-word)
        self._lock = threading.Lock()  # a PyStemmer stemmer is not thread-safe

    @staticmethod
    def words(text: str) -> list[str]:
        """The text's words, case-folded (ASCII's case-folding is its lower case)."""
        if text.isascii():
            return text.translate(ASCII_WORDS).split()
        return WORD.findall(text.casefold())

    @staticmethod
    def word_table(texts: list[str]) -> TokenTable:
        """Every text's `words`, end to end, dictionary-encoded (qtsearch.text.token_table):
        the texts translated as one UTF-8 buffer and split by pyarrow, no Python object made
        a word (a build's 50,000-row chunks in half the time of a list of words a text)."""
        return split_table([t.encode() if t.isascii()
                            else " ".join(WORD.findall(t.casefold())).encode() for t in texts],
                           BYTE_WORDS)

    def terms_of(self, words: list[str]) -> list[str | None]:
        """The term of each word, None for a stop-word."""
        known = self._terms
        found: dict[str, str | None] = {}
        new = []
        for w in dict.fromkeys(words):
            t = known.get(w, _UNSEEN)
            if t is _UNSEEN:
                new.append(w)
            else:
                found[w] = t
        if new:
            folded = [_fold(w) for w in new]
            with self._lock:
                stems = self._stemmer.stemWords(folded)
                if len(known) + len(new) > CACHE_WORDS:
                    known.clear()  # a long-running server meets ever new words
            for w, f, s in zip(new, folded, stems, strict=True):
                found[w] = known[w] = None if w in STOP_WORDS or f in STOP_WORDS else s
        return [found[w] for w in words]

    def terms(self, text: str) -> list[str]:
        """The terms of a text in order, stop-words left out."""
        return [t for t in self.terms_of(self.words(text)) if t is not None]
