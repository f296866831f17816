"""What a query returns: stored sentences (`Record`), ranked hits (`Hit`) and one query's list
of hits with what the engine has to say about the query (`Results`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Record:
    """A stored sentence and where it came from (line is 1-based, position counts within doc)."""

    id: int
    text: str
    source: str
    line: int
    doc: int
    position: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Hit(Record):
    """A search result. `score` ranks the hits of one mode: cosine similarity (semantic),
    BM25 (lexical) or the fused score (hybrid); `legs` holds each leg's own score."""

    score: float = 0.0
    legs: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape scripts rely on: id, score, text, source, line, doc, position, legs."""
        d = dataclasses.asdict(self)
        return {"id": d.pop("id"), "score": d.pop("score"), **d}


class Results(list[Hit]):
    """The hits of one query, best first (a plain list to compare and iterate), and `note`:
    a warning about the query itself (most of its words unknown to the model), or None."""

    def __init__(self, hits: Iterable[Hit] = (), note: str | None = None):
        super().__init__(hits)
        self.note = note
