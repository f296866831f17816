"""Sentence splitting of running text with BlingFire (fast C++ rules), returning each
sentence's character offset.

BlingFire sometimes cuts after a title ("… married. Mr." | "Weston was …"); a piece that ends
in a title or common abbreviation is glued to the next one, so "Mr." and "Dr." never end a
sentence.
"""

from __future__ import annotations

import re

import blingfire

from qtsearch.text.tokenizer import scrub

_NO_END = re.compile(
    r"(?:^|[\s(\"'“‘])(?:Mr|Mrs|Ms|Mme|Mlle|Dr|St|Prof|Rev|Hon|Col|Gen|Capt|Lt|Sgt|Mt|Jr|Sr|"
    r"Messrs|Gov|Pres|Sen|Rep|vs|etc|e\.g|i\.e|viz|cf|No|Vol|pp|Fig)\.$"
)


def split_sentences(paragraph: str) -> list[tuple[int, str]]:
    """Split a paragraph into (start offset, sentence) pairs; blank pieces are dropped."""
    if not paragraph.strip():
        return []
    paragraph = scrub(paragraph)
    _, offsets = blingfire.text_to_sentences_and_offsets(paragraph)
    spans: list[list[int]] = []
    for start, end in offsets:
        if spans and _NO_END.search(paragraph[spans[-1][0] : spans[-1][1]].rstrip()):
            spans[-1][1] = end
        else:
            spans.append([start, end])
    out = []
    for start, end in spans:
        piece = paragraph[start:end].strip()
        if piece:
            out.append((start, piece))
    return out


def split_text(paragraph: str) -> list[str]:
    """The sentences of a one-line paragraph, as `split_sentences` gives them, without their
    offsets, which is faster (blingfire maps the offsets back to characters in a Python loop
    over every byte) and matters in the read stage of a Wikipedia build (docs/indexing.md,
    "Wikipedia (WikiExtractor output)")."""
    if not paragraph.strip():
        return []
    out: list[str] = []
    for piece in blingfire.text_to_sentences(scrub(paragraph)).split("\n"):
        piece = piece.strip()
        if not piece:
            continue
        if out and _NO_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out
