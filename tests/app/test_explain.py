"""`--explain`, the empty-answer note, the weak-match signal and the search time, through the
real CLI on real indexes (the tiny model's and one built with the shipped model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import cli, run
from query_fixtures import corpus_file

from qtsearch.search.explain import WEAK_COSINE
from qtsearch.text.terms import Analyzer

Q1 = "She was very happy to see him again."
Q2 = "Emma walked to Hartfield with Harriet."
UNRELATED = "The quarterly revenue of the semiconductor company rose sharply."


def _answers(capsys, index: Path, *args: str) -> list[dict]:
    code, out, err = run(capsys, "search", str(index), *args, "--json", "--explain")
    assert code == 0, err
    return json.loads(out)


def test_the_explained_parts_add_up_to_the_fused_score(capsys, flat):
    for answer in _answers(capsys, flat, Q1, Q2, "-k", "8"):
        assert answer["hits"]
        for hit in answer["hits"]:
            why = hit["explain"]
            assert why["mode"] == "hybrid" and why["fusion"] == "convex"
            w = why["lexical_weight"]
            assert 0 < w < 1
            legs = why["legs"]
            assert set(legs) == {"semantic", "lexical"}
            # recomputed from each leg's score, mean and spread and the weight alone
            fused = sum((w if name == "lexical" else 1 - w)
                        * (leg["score"] - leg["mean"]) / leg["std"] for name, leg in legs.items())
            assert fused == pytest.approx(hit["score"], abs=1e-6)
            assert sum(leg["part"] for leg in legs.values()) == pytest.approx(hit["score"],
                                                                              abs=1e-6)
            assert {n: leg["score"] for n, leg in legs.items()} == hit["legs"]
            assert all(leg["rank"] is None or leg["rank"] >= 1 for leg in legs.values())


def test_matched_terms_are_the_query_terms_the_hit_holds(capsys, flat):
    analyzer = Analyzer()
    (answer,) = _answers(capsys, flat, Q2, "--mode", "lexical", "-k", "5")
    terms = list(dict.fromkeys(analyzer.terms(Q2)))
    for rank, hit in enumerate(answer["hits"], 1):
        why = hit["explain"]
        assert why["mode"] == "lexical" and why["fusion"] is None
        assert why["query_terms"] == terms and "hartfield" in terms
        assert why["matched"] == [t for t in terms if t in set(analyzer.terms(hit["text"]))]
        assert why["matched"]  # BM25 scores only rows holding a query term
        assert why["legs"]["lexical"]["score"] == hit["score"]
        assert why["legs"]["lexical"]["rank"] == rank


def test_semantic_explanations_are_the_cosine_and_its_rank(capsys, flat):
    (answer,) = _answers(capsys, flat, Q1, "--mode", "semantic", "-k", "4")
    for rank, hit in enumerate(answer["hits"], 1):
        why = hit["explain"]
        assert set(why["legs"]) == {"semantic"} and why["lexical_weight"] is None
        assert why["legs"]["semantic"] == {"score": hit["score"], "rank": rank}
        # the tiny test model has no calibrated threshold: no weak-match signal
        assert why["weak_below"] is None and why["weak"] is False


def test_explain_is_shown_after_the_hits_with_the_search_time(capsys, flat):
    code, out, err = run(capsys, "search", str(flat), Q1, "-k", "3", "--explain")
    assert code == 0
    lines = out.splitlines()
    why = lines.index("why")
    assert why == 4 and len(lines) == why + 5  # title, 3 hits; why, 3 rows, how it is fused
    assert lines[-1].startswith("score = ") and "z(cosine)" in lines[-1]
    assert "3 results in " in err and " ms" in err


def test_an_empty_answer_says_so_and_exits_0(capsys, flat):
    code, out, err = run(capsys, "search", str(flat), "xyzzy plugh", "--mode", "lexical")
    assert code == 0 and out.splitlines() == ["xyzzy plugh"]
    assert "no match for 'xyzzy plugh'" in err and "0 results in" in err
    (answer,) = _answers(capsys, flat, "xyzzy plugh", "--mode", "lexical")
    assert answer["hits"] == [] and answer["note"].startswith("no match for 'xyzzy plugh'")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory, shared_data) -> Path:
    """An index of Austen sentences built with the shipped model, through the CLI."""
    folder = tmp_path_factory.mktemp("shipped")
    out = folder / "index"
    r = cli("build-index", str(corpus_file(shared_data, folder)), "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
def test_weak_matches_are_flagged_by_the_calibrated_cosine(capsys, shipped):
    answers = _answers(capsys, shipped, Q2, UNRELATED, "-k", "5")
    notes = []
    for answer in answers:
        best = max(h["legs"]["semantic"] for h in answer["hits"])
        for hit in answer["hits"]:
            why = hit["explain"]
            assert why["weak_below"] == WEAK_COSINE
            assert why["weak"] == (hit["legs"]["semantic"] < WEAK_COSINE)
        no_good = best < WEAK_COSINE
        assert (answer["note"] is not None and "no good match" in answer["note"]) == no_good
        notes.append(no_good)
    assert notes == [False, True]  # Emma in Emma; company revenue not in Austen
    code, _, err = run(capsys, "search", str(shipped), UNRELATED)
    assert code == 0 and err.count("no good match") == 1


#: A WikiExtractor article whose list items and lead-in lines are rows of their own, beside
#: the sentences that answer; BM25 alone ranks the short rows first (shorter rows, higher score).
ARTICLE = """<doc id="7" url="https://en.wikipedia.org/wiki?curid=7" title="Australia">
Australia

Canberra is the capital city of Australia and the seat of its government.
Telephone system:
Australian Capital Territory
Capital of Australia
The telephone was invented in the nineteenth century and spread across Australia.
</doc>
"""


@pytest.mark.parametrize("mode", ["lexical", "hybrid", "semantic"])
def test_fragments_rank_below_the_sentences_that_answer(capsys, tmp_path, mode):
    source = tmp_path / "wiki_00"
    source.write_text(ARTICLE, encoding="utf-8")
    index = tmp_path / "index"
    r = cli("build-index", str(source), "--out", str(index), "--index", "flat")
    assert r.returncode == 0, r.stderr
    for query in ("capital of Australia", "Australia telephone system"):
        (answer,) = _answers(capsys, index, query, "--mode", mode, "-k", "5")
        flags = [h["explain"]["fragment"] for h in answer["hits"]]
        assert sum(flags) >= 1 and flags == sorted(flags), answer["hits"]  # sentences first
        assert answer["hits"][0]["text"].endswith(".")
    # the lexical leg alone puts a fragment first, which is why results reorder it
    (answer,) = _answers(capsys, index, "capital of Australia", "--mode", "lexical", "-k", "5")
    by_bm25 = sorted(answer["hits"], key=lambda h: -h["score"])
    assert by_bm25[0]["explain"]["fragment"]
    code, out, _ = run(capsys, "search", str(index), "capital of Australia", "--explain",
                       "--mode", "lexical")
    assert code == 0 and "(fragment: ranked below sentences)" in out
