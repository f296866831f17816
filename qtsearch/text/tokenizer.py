"""Word tokenisation with BlingFire: punctuation and clitics become tokens ("don't" → do n't),
case is kept (the vocabulary is case-sensitive, as in the paper)."""

from __future__ import annotations

import re
import threading
from ctypes import Array, c_char, create_string_buffer, string_at
from typing import TYPE_CHECKING

import blingfire

if TYPE_CHECKING:
    from qtsearch.text.vocab import Vocab

SURROGATE = re.compile("[\ud800-\udfff]")
#: BlingFire's C library as its package loads it. Its Python wrapper makes a new ctypes buffer
#: type per call, most of its cost a sentence; a buffer kept per thread avoids that (a build
#: tokenises every sentence; docs/benchmarks.md, "Speed").
_LIB = blingfire.blingfire
_buffers = threading.local()


def scrub(text: str) -> str:
    """Lone surrogates (undecodable bytes of argv or stdin under surrogateescape) become
    U+FFFD: BlingFire needs valid UTF-8. Same length, so character offsets stay valid."""
    return SURROGATE.sub("\ufffd", text)


def tokenize(text: str) -> list[str]:
    if not text:
        return []
    data = scrub(text).encode("utf-8")
    buffer = _buffer(len(data) * 3 + 1)  # the bound BlingFire's own wrapper allocates
    written = _LIB.TextToWords(data, len(data), buffer, len(buffer))  # bytes, with a NUL
    if written < 1 or written > len(buffer):  # an error: no words, as the wrapper does
        return []
    return string_at(buffer, written - 1).decode("utf-8").split()


def token_ids(vocab: Vocab, text: str, max_len: int) -> list[int]:
    """Vocabulary ids of a sentence, a word unknown as written looked up in another casing
    ("hello" as "Hello"): the one lookup of index builds and queries (`Encoder.token_ids`, and
    the build's tokenising processes, qtsearch.indexing.tokens)."""
    return vocab.encode(tokenize(text), max_len, fold_case=True)


def _buffer(size: int) -> Array[c_char]:
    """This thread's output buffer, grown to at least `size` bytes."""
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _buffers.buffer = create_string_buffer(max(size, 1 << 16))
    return buffer
