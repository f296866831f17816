"""Word alignment: the score against a word-by-word reference, and through real indexes built
with the shipped model: what it re-scores, what it leaves alone, and how it explains itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run

from qtsearch.core.errors import UsageError
from qtsearch.lifecycle import Index
from qtsearch.search.alignment import RowTokens, alignment
from qtsearch.search.fusion import ALIGNMENT_DEPTH, SearchSettings

QUERIES = ["Who cooked the soup?", "A farmer sang a song.", "roses in the garden"]


def _reference(query: np.ndarray, hit: np.ndarray) -> float:
    """Σ_q |q| · max_h cos(q, h) / Σ_q |q|, one word at a time."""
    if not len(hit):
        return 0.0
    total = weights = 0.0
    for q in query:
        best = max(float(q @ h) / (np.linalg.norm(q) * np.linalg.norm(h)) for h in hit)
        total += float(np.linalg.norm(q)) * best
        weights += float(np.linalg.norm(q))
    return total / weights


def test_the_alignment_is_the_word_by_word_reference() -> None:
    rng = np.random.default_rng(0)
    query = rng.normal(size=(5, 16)).astype(np.float32) * rng.uniform(0.5, 6, (5, 1))
    hits = [rng.normal(size=(n, 16)).astype(np.float32) for n in (1, 7, 0, 30)]
    hits.append(np.concatenate([query[::-1], hits[1]]))  # every query word, in another order
    every = np.concatenate(hits)
    distinct, positions = np.unique(every, axis=0, return_inverse=True)
    got = alignment(query, distinct, positions.reshape(-1), [len(h) for h in hits])
    assert got == pytest.approx([_reference(query, h) for h in hits], abs=1e-5)
    assert got[2] == 0.0 and got[4] == pytest.approx(1.0, abs=1e-6)
    # a heavy query word counts for more: a hit holding only it beats one holding the light one
    light, heavy = np.eye(2, 16, dtype=np.float32), np.eye(2, 16, 1, dtype=np.float32)
    two = np.stack([light[0], 5 * heavy[0]])
    assert alignment(two, np.stack([light[0], heavy[0]]), np.arange(2), [1, 1]).tolist() == \
        pytest.approx([1 / 6, 5 / 6])


@pytest.fixture(scope="module")
def index(shipped_index: Path):
    with Index.open(shipped_index, device="cpu") as opened:
        yield opened


def _off(index: Index) -> SearchSettings:
    return dataclasses.replace(index.settings, alignment=0.0)


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_aligned_hits_are_the_first_stage_s_best_re_scored(index: Index, mode: str) -> None:
    assert index.settings.alignment > 0
    depth = min(ALIGNMENT_DEPTH, len(index))
    for query in QUERIES:
        first = index.search(query, k=depth, mode=mode, settings=_off(index))
        aligned = index.search(query, k=5, mode=mode)
        assert all("alignment" not in (h.legs or {}) for h in first)
        scores = {h.id: h.score for h in first}
        assert {h.id for h in aligned} <= set(scores)
        for hit in aligned:
            assert hit.legs["first"] == pytest.approx(scores[hit.id], abs=1e-9)
            assert 0.0 <= hit.legs["alignment"] <= 1.0 + 1e-6
        assert [h.score for h in aligned] == sorted((h.score for h in aligned), reverse=True)


def test_hits_past_the_depth_keep_the_first_stage_s_order(index: Index) -> None:
    shallow = dataclasses.replace(index.settings, alignment_depth=5)
    explainer = index.explainer()
    for query in QUERIES:
        first = [h.id for h in index.search(query, k=12, settings=_off(index))]
        hits = index.search(query, k=12, settings=shallow)
        assert sorted(h.id for h in hits[:5]) == sorted(first[:5])
        assert [h.id for h in hits[5:]] == first[5:]
        for n, (hit, why) in enumerate(zip(hits, explainer.explain(query, hits),
                                           strict=True)):
            aligned = why["aligned"]
            assert ("alignment" in hit.legs) == (n < 5) == ("filled" not in aligned["alignment"])
            parts = aligned["first"]["part"] + aligned["alignment"]["part"]
            assert parts == pytest.approx(hit.score, abs=1e-6)


def test_the_explained_parts_add_up_to_the_aligned_score(index: Index) -> None:
    explainer = index.explainer()
    for query in QUERIES:
        hits = index.search(query, k=6)
        for hit, why in zip(hits, explainer.explain(query, hits), strict=True):
            aligned = why["aligned"]
            a = aligned["alignment_weight"]
            assert a == index.settings.alignment
            parts = aligned["first"]["part"] + aligned["alignment"]["part"]
            assert parts == pytest.approx(hit.score, abs=1e-6)
            assert aligned["first"]["score"] == hit.legs["first"]
            assert aligned["alignment"]["score"] == hit.legs["alignment"]
            # the first stage's own legs still add up to the first stage's score
            first = sum(leg["part"] for leg in why["legs"].values())
            assert first == pytest.approx(hit.legs["first"], abs=1e-6)


def test_lexical_search_and_an_alignment_of_zero_are_not_re_scored(index: Index) -> None:
    for hit in index.search(QUERIES[0], k=5, mode="lexical"):
        assert set(hit.legs) == {"lexical"}
    why = index.explainer().explain(QUERIES[0], index.search(QUERIES[0], k=3,
                                                             settings=_off(index)))
    assert all("aligned" not in w for w in why)


@pytest.mark.parametrize("change", [{"alignment": 1.0}, {"alignment": -0.1},
                                    {"alignment_depth": 0}, {"alignment_depth": 2.5}])
def test_impossible_alignment_settings_are_refused(change: dict) -> None:
    with pytest.raises(UsageError):
        SearchSettings(**change)


def test_explain_on_the_command_line_shows_both_stages(capsys, shipped_index: Path) -> None:
    code, out, err = run(capsys, "search", str(shipped_index), QUERIES[1], "-k", "3",
                         "--explain")
    assert code == 0, err
    lines = out.splitlines()
    rows = lines[lines.index("why") + 1 : -1]
    assert len(rows) == 3 and all(len(row.split("\t")) == 6 for row in rows)
    assert lines[-1].startswith("score = 0.50 × z(first stage) + 0.50 × z(word alignment)")


def test_kept_token_ids_are_the_texts_and_the_oldest_go_first(index: Index) -> None:
    """RowTokens gives each row's token ids as the encoder tokenises its text, reads from the
    store only the rows it does not hold, keeps at most its size (the least recently used
    leave first) and never keeps a row the store lacks."""
    encoder = index.encoder
    stored = {i: h.text for i, h in enumerate(index.search(QUERIES[0], k=6))}
    asked: list[list[int]] = []

    def texts(ids: list[int]) -> dict[int, str]:
        asked.append(list(ids))
        return {i: stored[i] for i in ids if i in stored}

    kept = RowTokens(encoder, size=3)
    got = kept.of([0, 1, 2], texts)
    assert [g.tolist() for g in got] == [encoder.token_ids(stored[i]) for i in (0, 1, 2)]
    assert kept.of([2, 0], texts)[0].tolist() == encoder.token_ids(stored[2])
    assert asked == [[0, 1, 2]] and len(kept) == 3
    kept.of([3, 99], texts)  # 1 is the least recently used; 99 is not stored
    assert asked[-1] == [3, 99] and len(kept) == 3
    kept.of([0, 2, 3], texts)
    kept.of([1], texts)
    assert asked[-1] == [1]


def test_a_second_search_answers_as_the_first(index: Index, shipped_index: Path) -> None:
    """The kept token ids change no score: the same search twice in one index, and in an index
    opened afresh, gives the same hits and scores."""
    first = [index.search(q, k=8) for q in QUERIES]
    again = [index.search(q, k=8) for q in QUERIES]
    with Index.open(shipped_index, device="cpu") as fresh:
        cold = [fresh.search(q, k=8) for q in QUERIES]
    for a, b, c in zip(first, again, cold, strict=True):
        assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b] \
            == [(h.id, h.score) for h in c]
