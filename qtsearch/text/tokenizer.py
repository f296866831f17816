"""Word tokenisation with BlingFire: punctuation and clitics become tokens ("don't" → do n't),
case is kept (the vocabulary is case-sensitive, as in the paper)."""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
from ctypes import CDLL, Array, c_char, cdll, create_string_buffer, string_at
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qtsearch.text.token_table import TokenTable
    from qtsearch.text.vocab import Vocab

SURROGATE = re.compile("[\ud800-\udfff]")
#: BlingFire's C library in its package folder, by platform, as the package names it.
_LIBRARY_FILE = {"win32": "blingfiretokdll.dll", "darwin": "libblingfiretokdll.dylib"}.get(
    sys.platform, "libblingfiretokdll.so")


def _library() -> CDLL:
    """BlingFire's C library, loaded from the package's folder without running the package's
    `__init__`, which finds that folder through `inspect` (a scan of every module loaded, a
    noticeable part of a one-shot query's start); the package's own loading where the file
    is not found there."""
    spec = importlib.util.find_spec("blingfire")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / _LIBRARY_FILE).is_file():
            return cdll.LoadLibrary(str(Path(folder) / _LIBRARY_FILE))
    import blingfire

    return blingfire.blingfire


#: BlingFire's Python wrapper makes a new ctypes buffer type per call, most of its cost a
#: sentence; a buffer kept per thread avoids that (a build tokenises every sentence;
#: docs/benchmarks.md, "Speed").
_LIB = _library()
_buffers = threading.local()


def scrub(text: str) -> str:
    """Lone surrogates (undecodable bytes of argv or stdin under surrogateescape) become
    U+FFFD: BlingFire needs valid UTF-8. Same length, so character offsets stay valid."""
    return SURROGATE.sub("\ufffd", text)


def tokenize(text: str) -> list[str]:
    return _words(text).decode("utf-8").split()


def token_table(texts: list[str]) -> TokenTable:
    """`tokenize` of every text at once, dictionary-encoded (qtsearch.text.token_table): what
    a build's tokenising workers look up. BlingFire separates its tokens by single spaces
    whatever whitespace or control characters it was given (every Unicode space checked,
    tests/text/test_text.py), so splitting its output at spaces is `str.split()`'s."""
    from qtsearch.text.token_table import split_table

    return split_table(list(map(_words, texts)))


def _words(text: str) -> bytes:
    """BlingFire's tokens of a text, as UTF-8, separated by spaces."""
    if not text:
        return b""
    try:  # a text with no lone surrogate, nearly every one, encodes as it is: no scan first
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = scrub(text).encode("utf-8")
    buffer = _buffer(len(data) * 3 + 1)  # the bound BlingFire's own wrapper allocates
    written = _LIB.TextToWords(data, len(data), buffer, len(buffer))  # bytes, with a NUL
    if written < 1 or written > len(buffer):  # an error: no words, as the wrapper does
        return b""
    return string_at(buffer, written - 1)


def token_ids(vocab: Vocab, text: str, max_len: int) -> list[int]:
    """Vocabulary ids of a sentence, a word unknown as written looked up in another casing
    ("hello" as "Hello"): the lookup of index builds and queries (`Encoder.token_ids`; the
    build's tokenising processes, qtsearch.indexing.tokens, look a task's texts up at once
    with `Vocab.encode_table`, to the same ids)."""
    return vocab.encode(tokenize(text), max_len, fold_case=True)


def _buffer(size: int) -> Array[c_char]:
    """This thread's output buffer, grown to at least `size` bytes."""
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None or len(buffer) < size:
        buffer = _buffers.buffer = create_string_buffer(max(size, 1 << 16))
    return buffer
