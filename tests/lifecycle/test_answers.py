"""qtsearch.lifecycle.answers: many queries answered one by one (a bad query fails alone), the
neighbours of stored rows, analogies, and the JSON shape, on a real index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import GRID_SENTENCES

from qtsearch.core.errors import InputError, UsageError
from qtsearch.lifecycle.answers import answer_analogy, answer_ids, answer_json, answer_queries
from qtsearch.lifecycle.facade import Index


@pytest.fixture(scope="module")
def index(shipped_index: Path) -> Iterator[Index]:
    with Index.open(shipped_index) as opened:
        yield opened


def test_a_bad_query_fails_alone_and_the_order_is_kept(index: Index) -> None:
    answers = answer_queries(index, ["a pot of soup", "   ", "roses in the garden"], k=2,
                             mode="semantic")
    assert [q for q, _, _ in answers] == ["a pot of soup", "   ", "roses in the garden"]
    (_, soup, none1), (_, empty, error), (_, roses, none2) = answers
    assert none1 is None and none2 is None
    assert empty is None and isinstance(error, InputError) and "empty query" in str(error)
    assert len(soup) == 2 and all("soup" in h.text for h in soup)
    assert all("roses" in h.text for h in roses)


def test_a_fault_of_the_whole_request_raises(index: Index) -> None:
    with pytest.raises(UsageError, match="unknown search mode 'fuzzy'"):
        answer_queries(index, ["soup"], k=2, mode="fuzzy")
    with pytest.raises(UsageError, match="cannot filter on 'author'"):
        answer_queries(index, ["soup"], k=2, where={"author": "x"})


def test_neighbours_of_stored_rows_leave_each_row_out(index: Index) -> None:
    answers = answer_ids(index, [0, 7], k=3)
    assert [i for i, _, _ in answers] == [0, 7]
    for i, hits, error in answers:
        assert error is None and len(hits) == 3 and i not in [h.id for h in hits]
    with pytest.raises(InputError, match="no sentence with id 999"):
        answer_ids(index, [0, 999], k=3)


def test_an_analogy_answer_names_its_query(index: Index) -> None:
    a, b, c = GRID_SENTENCES[0], GRID_SENTENCES[2], GRID_SENTENCES[5]
    query, hits, error = answer_analogy(index, a, b, c, k=2)
    assert query == f"{a} : {b} :: {c} : ?" and error is None
    assert hits[0].text == "A farmer sang an old song." and {a, b, c}.isdisjoint(
        h.text for h in hits)
    _, kept, _ = answer_analogy(index, a, b, c, k=len(GRID_SENTENCES), keep_inputs=True)
    assert {a, b, c} <= {h.text for h in kept}


def test_the_json_shape(index: Index) -> None:
    ((query, hits, _),) = answer_queries(index, ["a pot of soup"], k=2, mode="semantic")
    shaped = answer_json(query, hits)
    assert list(shaped) == ["query", "hits", "note", "error"]
    assert shaped["query"] == "a pot of soup" and shaped["error"] is None
    assert [d["id"] for d in shaped["hits"]] == [h.id for h in hits]
    assert list(shaped["hits"][0])[:3] == ["id", "score", "text"]
    failed = answer_json("  ", None, InputError("empty query: type a sentence"))
    assert failed == {"query": "  ", "hits": [], "note": None,
                      "error": "empty query: type a sentence"}


def test_the_json_shape_with_explanations(index: Index) -> None:
    ((query, hits, _),) = answer_queries(index, ["a pot of soup"], k=2, mode="semantic")
    shaped = answer_json(query, hits, explainer=index.explainer())
    assert all("explain" in d for d in shaped["hits"])
