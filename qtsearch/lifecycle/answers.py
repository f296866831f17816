"""Answers to many queries at once, as `qtsearch search --json` prints them and `qtsearch serve`
returns them: one {query, hits, note, error} per query, in order. A query that is itself at
fault (empty; in semantic mode, only unknown words) gets its error and the others are still
answered; anything wrong with the whole request (mode, filters, k) raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from qtsearch.core.batching import chunks
from qtsearch.core.errors import InputError, QTSearchError
from qtsearch.search.defaults import ALONE_UP_TO
from qtsearch.search.hits import Results

if TYPE_CHECKING:  # the CLI imports this module before it needs faiss and torch
    from qtsearch.lifecycle.facade import Index
    from qtsearch.search.explain import Explainer
    from qtsearch.search.rerank import Reranker

#: One query's answer: the query, its hits (None after an error) and its error (or None).
Answer = tuple[str | int, Results | None, QTSearchError | None]


def answer_queries(index: Index, queries: Sequence[str], k: int, mode: str | None = None,
                   where: Mapping[str, str | int] | None = None,
                   rerank: Reranker | None = None, by: str = "passage") -> list[Answer]:
    """Each query answered as it is alone, so that one bad query fails alone (`by`: passages
    or documents, as `Index.search`): up to ALONE_UP_TO at a time in one `search_many` call,
    which answers each as alone and shares the call's work; a batch that one query's fault
    fails, and a re-ranked search (whose re-ranker encodes a batch otherwise), query by
    query."""
    answers: list[Answer] = []
    for batch in chunks(queries, ALONE_UP_TO if rerank is None else 1):
        if len(batch) > 1:
            try:
                found = index.search_many(batch, k, mode, where, None, by)
            except InputError:  # whose query it is, each alone tells
                pass
            else:
                answers.extend((q, hits, None) for q, hits in zip(batch, found, strict=True))
                continue
        for q in batch:
            try:
                answers.append((q, index.search(q, k, mode, where, rerank, by), None))
            except InputError as e:  # this query's fault: answer the others
                answers.append((q, None, e))
    return answers


def answer_ids(index: Index, ids: Sequence[int], k: int,
               where: Mapping[str, str | int] | None = None) -> list[Answer]:
    """The neighbours of stored sentences (each left out of its own list); an unknown id
    fails the whole request (InputError), as it names nothing to search for."""
    results = index.search_ids(ids, k, where=where)
    return [(i, hits, None) for i, hits in zip(ids, results, strict=True)]


def answer_analogy(index: Index, a: str, b: str, c: str, k: int,
                   keep_inputs: bool = False) -> Answer:
    """Sentences D with A : B :: C : D, under the query "A : B :: C : ?"."""
    return (f"{a} : {b} :: {c} : ?", index.analogy(a, b, c, k, exclude_inputs=not keep_inputs),
            None)

def answer_json(query: str | int, hits: Results | None, error: Exception | None = None,
                explainer: Explainer | None = None) -> dict[str, Any]:
    """One answer in its JSON shape: {query, hits, note, error}; after an error the hits are
    empty and `error` is the message (the same line the CLI prints). With `explainer`, each
    hit also has its `explain` (qtsearch.search.explain)."""
    shaped = [h.to_dict() for h in hits or []]
    if explainer is not None and hits:
        for d, why in zip(shaped, explainer.explain(query, hits), strict=True):
            d["explain"] = why
    return {"query": query, "hits": shaped, "note": getattr(hits, "note", None),
            "error": str(error) if error else None}
