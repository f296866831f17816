"""Sentence splitting of running text with BlingFire (fast C++ rules that keep "Mr." and
"Dr." inside their sentence), returning each sentence's character offset."""

from __future__ import annotations

import blingfire


def split_sentences(paragraph: str) -> list[tuple[int, str]]:
    """Split a paragraph into (start offset, sentence) pairs; blank pieces are dropped."""
    if not paragraph.strip():
        return []
    _, offsets = blingfire.text_to_sentences_and_offsets(paragraph)
    out = []
    for start, end in offsets:
        piece = paragraph[start:end].strip()
        if piece:
            out.append((start, piece))
    return out
