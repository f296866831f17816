"""SearchSettings: an index's own, resolved once when it opens, and another for one search that
leaves every other search as it was. On a real index of Emma's sentences built with the
shipped model."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from qtsearch.core.errors import UsageError
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.fusion import CANDIDATES, DEFAULT_FUSION, SearchSettings, settings_for
from qtsearch.search.searcher import Searcher

QUERY = "Mr. Knightley walked in the garden with Emma."


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, emma_lines: Path):
    out = tmp_path_factory.mktemp("settings") / "emma"
    build_index(IndexConfig(corpus=[str(emma_lines)], out=str(out), index="flat",
                            device="cpu"))
    with Searcher.open(out, device="cpu") as opened:
        yield opened


def _ranked(results) -> list[tuple[int, float]]:
    return [(h.id, h.score) for h in results]


def test_an_index_resolves_its_settings_once_from_its_model_and_rows(index: Searcher) -> None:
    own = index.settings
    bm25 = index.lexical.bm25
    assert own == settings_for(float(index.encoder.search["lexical_weight"]), bm25.avglen,
                               (bm25.k1, bm25.b))
    assert (own.fusion, own.candidates, own.feedback) == (DEFAULT_FUSION, CANDIDATES, 0.0)


def test_settings_given_to_one_search_change_that_search_only(index: Searcher) -> None:
    own = index.settings
    before = index.search(QUERY, k=10, mode="hybrid")[0]
    rrf = index.search(QUERY, k=10, mode="hybrid",
                       settings=dataclasses.replace(own, fusion="rrf"))[0]
    lexical_heavy = index.search(QUERY, k=10, mode="hybrid",
                                 settings=dataclasses.replace(own, lexical_weight=1.0))[0]
    assert rrf.basis.fusion == "rrf" and _ranked(rrf) != _ranked(before)
    assert lexical_heavy.basis.lexical_weight == 1.0
    assert _ranked(lexical_heavy) != _ranked(before)
    assert index.settings is own and before.basis.fusion == own.fusion
    assert _ranked(index.search(QUERY, k=10, mode="hybrid")[0]) == _ranked(before)


def test_threads_searching_with_different_settings_each_get_their_own(index: Searcher) -> None:
    rrf = dataclasses.replace(index.settings, fusion="rrf")
    alone = {None: _ranked(index.search(QUERY, k=10, mode="hybrid")[0]),
             rrf: _ranked(index.search(QUERY, k=10, mode="hybrid", settings=rrf)[0])}
    asked = [None, rrf] * 8
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: _ranked(index.search(QUERY, k=10, mode="hybrid",
                                                           settings=s)[0]), asked))
    assert got == [alone[s] for s in asked]


def test_fewer_candidates_per_leg_fuse_fewer_rows(index: Searcher) -> None:
    few = dataclasses.replace(index.settings, candidates=3)
    own = index.search(QUERY, k=1, mode="hybrid")[0].basis.legs["semantic"]
    fewer = index.search(QUERY, k=1, mode="hybrid", settings=few)[0].basis.legs["semantic"]
    assert len(own.order) == CANDIDATES > len(fewer.order)  # a hit's own fetch stays a floor


def test_bad_settings_are_refused(index: Searcher) -> None:
    with pytest.raises(UsageError, match="unknown fusion"):
        dataclasses.replace(index.settings, fusion="max")
    with pytest.raises(UsageError, match="between 0 and 1"):
        SearchSettings(lexical_weight=1.5)
    with pytest.raises(UsageError, match="candidates"):
        SearchSettings(candidates=0)
    with pytest.raises(UsageError, match="unknown search setting"):
        settings_for(0.3, None, weight=0.5)
    # k1 and b are baked into the BM25 files: a search cannot choose others
    with pytest.raises(UsageError, match="fixed when an index is built"):
        index.search(QUERY, k=3, settings=dataclasses.replace(index.settings, k1=0.9))
    assert settings_for(0.3, None, fusion="rrf").fusion == "rrf"
