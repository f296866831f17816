"""qtsearch.search.analogy through `qtsearch.Index.analogy`, with the shipped model on a grid of
sentences where the answer to a : b :: c : ? is clear."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import GRID_SENTENCES

import qtsearch
from qtsearch.search.analogy import analogy
from qtsearch.search.searcher import Searcher

A = "The cat slept by the warm fire."
B = "The cat sang an old song."
C = "A farmer slept by the warm fire."


@pytest.fixture(scope="module")
def index(shipped_index: Path) -> Iterator[qtsearch.Index]:
    with qtsearch.Index.open(shipped_index) as opened:
        yield opened


def test_the_clear_answer_comes_first(index: qtsearch.Index) -> None:
    results = index.analogy(A, B, C, k=3)
    assert results[0].text == "A farmer sang an old song."
    assert [h.score for h in results] == sorted((h.score for h in results), reverse=True)


def test_the_inputs_are_left_out_even_respaced_and_recased(index: qtsearch.Index) -> None:
    every = index.analogy(A, B, C, k=len(GRID_SENTENCES))
    assert {A, B, C}.isdisjoint(h.text for h in every)
    assert len(every) == len(GRID_SENTENCES) - 3  # k past the rows: all the others
    loose = index.analogy(A.upper(), "the  cat sang an   old song .", C, k=len(GRID_SENTENCES))
    assert {A, B, C}.isdisjoint(h.text for h in loose)


def test_keeping_the_inputs(index: qtsearch.Index) -> None:
    kept = index.analogy(A, B, C, k=len(GRID_SENTENCES), exclude_inputs=False)
    assert len(kept) == len(GRID_SENTENCES) and {A, B, C} <= {h.text for h in kept}


def test_the_score_is_the_cosine_to_c_plus_b_minus_a(shipped_index: Path) -> None:
    with Searcher.open(shipped_index) as searcher:  # what the facade hands to analogy()
        check_scores(searcher)


def check_scores(searcher: Searcher) -> None:
    va, vb, vc = searcher.embed([A, B, C])
    query = (vc + vb - va) / np.linalg.norm(vc + vb - va)
    results = analogy(searcher, A, B, C, k=4)
    vectors = searcher.embed([h.text for h in results])
    expected = vectors @ query / np.linalg.norm(vectors, axis=1)
    assert [h.score for h in results] == pytest.approx(expected.tolist(), abs=1e-4)
