"""Small real indexes for the query-layer tests, built once per test session.

The corpus is the first sentences of two real Austen novels (shared data), one per line with a
blank line between the books (two documents); the index is built by the real builder with the
session's tiny model. Cached here so test_search, test_query_cli and test_shell share them.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.text.reader import read_sentences

BOOKS = ["gutenberg/0003-austen-jane--emma.txt.gz",
         "gutenberg/0641-austen-jane--pride-and-prejudice.txt.gz"]
#: Sentences taken from the start of each book: big enough for neighbours to mean something,
#: small enough that a build takes about a second.
PER_BOOK = 1000

_built: dict[str, Path] = {}


def corpus_file(shared_data: Path, folder: Path) -> Path:
    """The test corpus in lines mode (one sentence a line, a blank line between books)."""
    path = folder / "austen.txt"
    if not path.exists():
        lines: list[str] = []
        for book in BOOKS:
            sentences = read_sentences([str(shared_data / book)], split=True)
            lines += [" ".join(s.text.split()) for s in itertools.islice(sentences, PER_BOOK)]
            lines.append("")
        path.write_text("\n".join(lines), encoding="utf-8")
    return path


def small_index(factory: pytest.TempPathFactory, shared_data: Path, model: Path,
                index_type: str = "flat") -> Path:
    """An index folder of `index_type` over the test corpus (built on first use)."""
    if index_type not in _built:
        folder = factory.mktemp(f"index_{index_type}")
        corpus = corpus_file(shared_data, folder)
        out = folder / "index"
        # fp32 as the query side encodes: tests compare scores with exact ones to 1e-4
        build_index(IndexConfig(corpus=[str(corpus)], model=str(model), out=str(out),
                                index=index_type, device="cpu", precision="fp32"))
        _built[index_type] = out
    return _built[index_type]
