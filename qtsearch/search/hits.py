"""What a query returns: stored sentences (`Record`), ranked hits (`Hit`) and one query's list
of hits with what the engine has to say about the query (`Results`), and how it ranked them
(`Basis`)."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtsearch.core.errors import UsageError
from qtsearch.text.sentence import ARTICLE_FIELDS, Sentence

#: A Sentence's fields, in their order: what a hit shows after its id (and score).
SENTENCE_FIELDS = tuple(f.name for f in dataclasses.fields(Sentence))

log = logging.getLogger("qtsearch")

#: What a result is: a stored passage (sentence), or a document ranked by its best passage.
UNITS = ("passage", "doc")
#: Passages a result by document keeps beside its best one.
DOC_PASSAGES = 3
#: How much deeper than its first fetch a search looks for k distinct texts (documents):
#: two more fetches at most, each four times the one before.
MAX_DEEPENING = 16
#: Passages fetched per result wanted, so that k distinct texts (or documents) remain after
#: duplicates (and a document's other passages) are folded away.
FETCH_PER_RESULT = {"passage": 2, "doc": 4}
#: A row of at most this many words, capitalised as a title and not ended as a sentence ends,
#: is a label, a list item or a heading kept as text ("Australian Capital Territory", "Notes"):
#: BM25 favours such short rows, yet they answer nothing. Short rows in lower case are often
#: what a corpus is made of (captions such as "man on steps", "People are walking") and stay.
FRAGMENT_WORDS = 3
#: Words a title leaves in lower case ("Capital of Australia").
_TITLE_SMALL = frozenset(["a", "an", "and", "at", "by", "for", "in", "of", "on", "or", "the",
                          "to"])
#: A row of at most this many words ending in a colon introduces what it does not hold
#: ("Telephone system:", "Age structure:"); a longer one is a sentence that leads into a list.
LEAD_IN_WORDS = 6
_SENTENCE_END = re.compile(r"""[.!?\u2026]["'\u201d\u2019)\]]*$""")


def is_fragment(text: str) -> bool:
    """Whether a stored row is a fragment (FRAGMENT_WORDS, LEAD_IN_WORDS) rather than a
    sentence: results rank fragments below every sentence fetched with them."""
    text = text.strip()
    words = text.split()
    if text.endswith(":"):
        return len(words) <= LEAD_IN_WORDS
    return (len(words) <= FRAGMENT_WORDS and not _SENTENCE_END.search(text)
            and all(not w[0].isalpha() or w[0].isupper() or w in _TITLE_SMALL for w in words))


@dataclass(frozen=True)
class Record(Sentence):
    """A stored sentence: where it came from (`Sentence`: line is 1-based, position counts
    within doc; a Wikipedia sentence also has its article's title, url and id, and its
    section: "" in the lead, before the first heading) and its row id in the index."""

    id: int = field(kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        """The id, then the fields, without the article ones where the sentence has none
        (other text)."""
        return _sentence_fields(self, {"id": self.id})

    def origin(self) -> str:
        """Where the sentence is, for people: "Title › Section" in Wikipedia, else
        "file:line"."""
        if self.title is None:
            return f"{Path(self.source).name}:{self.line}"
        return f"{self.title} › {self.section}" if self.section else self.title


@dataclass(frozen=True)
class Hit(Record):
    """A search result. `score` ranks the hits of one mode: cosine similarity (semantic),
    BM25 (lexical) or the fused score (hybrid); `legs` holds each leg's own score."""

    score: float = 0.0
    legs: dict[str, float] | None = None
    #: In results by document: the document's other matching passages, best first.
    passages: tuple[Hit, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape scripts rely on: id, score, text, source, line, doc, position (then
        title, url, doc_id, section for Wikipedia sentences and records), legs; in results by
        document also `passages`, the document's other matching passages."""
        shaped = _sentence_fields(self, {"id": self.id, "score": self.score})
        shaped["legs"] = dict(self.legs) if self.legs is not None else None
        if self.passages is not None:
            shaped["passages"] = [p.to_dict() for p in self.passages]
        return shaped


def _sentence_fields(record: Record, shaped: dict[str, Any]) -> dict[str, Any]:
    """`shaped` with the record's Sentence fields added in their order, the article ones only
    where the sentence has them. Read field by field from a list made once (not
    dataclasses.asdict, whose deep copy of every hit was a tenth of a served query's work, nor
    dataclasses.fields, a fifth of what shaping a hit cost)."""
    for name in SENTENCE_FIELDS:
        value = getattr(record, name)
        if value is not None or name not in ARTICLE_FIELDS:
            shaped[name] = value
    return shaped


@dataclass(frozen=True)
class LegBasis:
    """One leg of one query: its ids in its own order (rank 1 first) and the mean and
    standard deviation of its scores over the fused candidates (the convex fusion's z)."""

    order: dict[int, int]
    mean: float
    std: float


@dataclass(frozen=True)
class Aligned:
    """The word-alignment stage of one query (qtsearch.search.alignment): its `weight` in a
    hit's score, the mean and standard deviation of the first stage's scores (`first`) and of
    the alignments (`words`) over the hits it re-scored (the z of each), and the lowest of
    those alignments (`floor`: a hit past them is given it)."""

    weight: float
    first: tuple[float, float]
    words: tuple[float, float]
    floor: float


@dataclass(frozen=True)
class Basis:
    """How one query's hits were ranked: `legs` by name ("semantic", "lexical"), `fusion`
    ("convex" or "rrf") and BM25's `lexical_weight` where both legs were fused, else None;
    `aligned`: the word-alignment stage where one re-scored the first hits."""

    legs: dict[str, LegBasis]
    fusion: str | None = None
    lexical_weight: float | None = None
    aligned: Aligned | None = None

    @property
    def mode(self) -> str:
        return "hybrid" if len(self.legs) == 2 else next(iter(self.legs), "semantic")


class Results(list[Hit]):
    """The hits of one query, best first (a plain list to compare and iterate); `note`: a
    warning about the query itself (most of its words unknown to the model, no match, no
    good match), or None; `query`, where the caller set it (qtsearch.Index does); and
    `basis`, how the engine ranked them (qtsearch.search.explain), where it did; re-ranked,
    `rerank_weight`: the re-ranker's share of each score (qtsearch.search.rerank)."""

    def __init__(self, hits: Iterable[Hit] = (), note: str | None = None,
                 query: str | None = None, basis: Basis | None = None,
                 rerank_weight: float | None = None):
        super().__init__(hits)
        self.note = note
        self.query = query
        self.basis = basis
        self.rerank_weight = rerank_weight


def fold(results: Results, k: int, by: str) -> Results:
    """The first `k` hits of `results` with each text shown once (equal up to spacing and
    case) and, `by` "doc", each document once: its best passage, the others in `passages`.
    Fragments (is_fragment) come after the sentences, each part in its own order."""
    seen: set[str] = set()
    docs: dict[int, list[Hit]] = {}
    order: list[Hit] = []
    for hit in sorted(results, key=lambda h: is_fragment(h.text)):  # stable: ranks kept
        key = " ".join(hit.text.casefold().split())
        if key in seen:
            continue
        seen.add(key)
        if by == "doc":
            if hit.doc in docs:
                docs[hit.doc].append(hit)
                continue
            docs[hit.doc] = [hit]
        order.append(hit)
    if by == "doc":
        order = [dataclasses.replace(h, passages=tuple(docs[h.doc][1:1 + DOC_PASSAGES]))
                 for h in order[:k]]
    return Results(order[:k], results.note, results.query, results.basis,
                   results.rerank_weight)


def check_unit(by: str) -> None:
    """A UsageError unless `by` is one of UNITS."""
    if by not in UNITS:
        raise UsageError(f"unknown result unit {by!r}; choose from {', '.join(UNITS)}")


def first_fetch(k: int, by: str, count: int) -> int:
    """How many passages `deepen` fetches for one query first (of an index of `count` rows)."""
    check_unit(by)
    return min(count, k * FETCH_PER_RESULT[by] + 10)


def deepen(search: Callable[[int, list[int]], list[Results]], queries: int, k: int, by: str,
           count: int) -> list[Results]:
    """Each of `queries` queries' `k` folded hits (`fold`) from `search(fetch, which)`, the
    `fetch` best passages of each query numbered in `which`. A list folded below k while its
    passages ran to `fetch` (many copies of one text; few documents, or one document's
    passages filling the list) is fetched again deeper, up to MAX_DEEPENING times the first
    fetch, and not after a deeper fetch found nothing new: on an index of 10 documents, k=100
    by document would otherwise rank and read every row. Only the short lists are fetched
    again, so a query answers the same asked alone or beside others. A list left short that
    way says so in its note."""
    first = first_fetch(k, by, count)
    folded: list[Results] = [Results()] * queries
    fetch, which = first, list(range(queries))
    while which:
        found = search(fetch, which)
        short = []
        for n, results in zip(which, found, strict=True):
            before, folded[n] = folded[n], fold(results, k, by)
            if len(folded[n]) < k and len(results) >= fetch and fetch < count:
                # deeper while the last fetch found more: the first always counts as growing
                grew = fetch == first or len(folded[n]) > len(before)
                if grew and fetch < first * MAX_DEEPENING:
                    short.append(n)
                else:
                    _looked_no_deeper(folded[n], k, by, fetch)
        which, fetch = short, min(count, fetch * 4, first * MAX_DEEPENING)
    return folded


def _looked_no_deeper(results: Results, k: int, by: str, fetch: int) -> None:
    unit = "documents" if by == "doc" else "distinct passages"
    note = (f"{len(results)} of {k} {unit} found among the best {fetch:,} passages; "
            "the search looked no deeper")
    results.note = f"{results.note}; {note}" if results.note else note
    log.warning("%s", note)
