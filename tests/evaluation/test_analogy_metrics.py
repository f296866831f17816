"""Analogy metrics on a hand-made pool with known answers, and the runner on a real tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import small_yelp_data

from qtsearch.evaluation.analogy.analogy_run import OVERALL, evaluate, questions
from qtsearch.evaluation.analogy.build import AnalogyTuple
from qtsearch.evaluation.analogy.metrics import rank_answers, scores_by_group, summarise

# Six unit vectors; the query a:b::c:? with a=0, b=1, c=2 is v2 + v1 − v0 = (−1, 1, 1), whose
# scores against the pool are −1, 1, 1, 1.4, 0.2, 1.
POOL = np.array([
    [1.0, 0.0, 0.0],   # 0
    [0.0, 1.0, 0.0],   # 1
    [0.0, 0.0, 1.0],   # 2
    [0.0, 0.6, 0.8],   # 3: the best match of (−1, 1, 1)
    [0.6, 0.8, 0.0],   # 4: scores 0.2, below 3, 5 and the query sentences 1, 2
    [-1.0, 0.0, 0.0],  # 5: scores 1
], dtype=np.float32)


def test_ranks_excluding_and_including_the_query_sentences() -> None:
    ranks = rank_answers(POOL, np.array([[0, 1, 2, 3], [0, 1, 2, 4]]))
    assert ranks.excluding.tolist() == [1, 3]  # 4 is beaten by 3 and 5
    assert ranks.including.tolist() == [1, 5]  # ... and by the query sentences 1 and 2
    assert ranks.top_excluding.tolist() == [3, 3]
    assert ranks.top_including.tolist() == [3, 3]
    assert summarise(ranks.excluding) == pytest.approx({"top1": 0.5, "top5": 1.0,
                                                        "mrr": (1 + 1 / 3) / 2})
    assert summarise(ranks.including) == pytest.approx({"top1": 0.5, "top5": 1.0,
                                                        "mrr": (1 + 1 / 5) / 2})


def test_the_query_sentence_c_can_win_only_when_included() -> None:
    # a=0, b=1, c=3, d=2: query (−1, 1.6, 0.8) scores 1 → 1.6, 3 → 1.6, 5 → 1, 2 → 0.8
    ranks = rank_answers(POOL, np.array([[0, 1, 3, 2]]))
    assert ranks.excluding.tolist() == [2]
    assert ranks.including.tolist() == [4]
    assert ranks.top_excluding.tolist() == [5]
    assert ranks.top_including.tolist()[0] in (1, 3)


def test_ties_count_against_the_answer() -> None:
    """An encoder that gives every sentence the same vector must score 0, not 1."""
    pool = np.tile(np.array([[0.6, 0.8]], dtype=np.float32), (10, 1))
    ranks = rank_answers(pool, np.array([[0, 1, 2, 3]]))
    assert ranks.including.tolist() == [10]
    assert ranks.excluding.tolist() == [7]
    assert summarise(ranks.excluding)["top1"] == 0.0


def test_batches_do_not_change_the_ranks() -> None:
    rng = np.random.default_rng(0)
    pool = rng.standard_normal((200, 8)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    abcd = np.array([rng.choice(200, 4, replace=False) for _ in range(50)])
    one, many = rank_answers(pool, abcd, batch_size=50), rank_answers(pool, abcd, batch_size=7)
    assert one.excluding.tolist() == many.excluding.tolist()
    assert one.including.tolist() == many.including.tolist()
    # brute force for one question
    a, b, c, d = abcd[0]
    s = (pool[c] + pool[b] - pool[a]) @ pool.T
    others = [j for j in range(200) if j not in (a, b, c, d)]
    assert one.excluding[0] == 1 + sum(s[j] >= s[d] for j in others)


def test_scores_by_group() -> None:
    ranks = rank_answers(POOL, np.array([[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 3, 2]]))
    groups = scores_by_group(ranks, ["x", "x", "y"], c=np.array([2, 2, 3]))
    assert groups["x"]["questions"] == 2 and groups["y"]["questions"] == 1
    assert groups["x"]["excluding"]["top1"] == 0.5
    assert groups["y"]["including"]["mrr"] == pytest.approx(0.25)
    assert groups["x"]["including"]["retrieves_c"] == 0.0  # 3 is retrieved, C is 2
    # the third question's nearest is 1 or 3 (a tie at 1.6); 3 is its C
    assert groups["y"]["including"]["retrieves_c"] == float(ranks.top_including[2] == 3)


def _tuples() -> list[AnalogyTuple]:
    return [
        AnalogyTuple("family-0001", "word", "family", "google",
                     ["he is a great chef .", "she is a great chef .",
                      "he was very nice .", "she was very nice ."], [["he", "she"]] * 2),
        AnalogyTuple("sentiment-0001", "sentiment", "sentiment", "li2018",
                     ["the food was bad .", "the food was good .",
                      "rude staff .", "friendly staff ."]),
    ]


def test_questions_are_the_four_orders_of_each_tuple() -> None:
    pool = ["x", *(s for t in _tuples() for s in t.sentences)]
    qs = questions(_tuples(), pool)
    assert qs.abcd[:4].tolist() == [[1, 2, 3, 4], [2, 1, 4, 3], [3, 4, 1, 2], [4, 3, 2, 1]]
    assert qs.category == ["family"] * 4 + ["sentiment"] * 4


def test_evaluate_a_real_model_and_reuse_the_cache(tiny_model, tmp_path, monkeypatch) -> None:
    from qtsearch.encoders.registry import load_encoder

    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))
    encoder = load_encoder(tiny_model, device="cpu")
    pool = [*(s for t in _tuples() for s in t.sentences),
            "i like this place .", "the service was slow .", "we will be back !"]
    first = evaluate(encoder, _tuples(), pool)
    assert not first.cached
    assert set(first.scores) == {"family", "sentiment", OVERALL}
    assert first.scores[OVERALL]["questions"] == 4  # word analogies only
    for mode in ("excluding", "including"):
        s = first.scores["family"][mode]
        assert 0 <= s["top1"] <= s["top5"] <= 1 and 0 < s["mrr"] <= 1
    second = evaluate(encoder, _tuples(), pool)
    assert second.cached and second.scores == first.scores
    assert len(list((tmp_path / "cache" / "analogy").glob("*.npy"))) == 1


def _cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """Run the real command line in this process: (exit code, stdout, stderr)."""
    from qtsearch.app.cli import main

    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_build_and_run(tiny_model: Path, shared_data: Path, tmp_path: Path,
                           capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    data = small_yelp_data(shared_data, tmp_path / "data")
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))
    tuples = tmp_path / "t.jsonl"
    code, out, err = _cli(capsys, "bench", "analogy", "build", "--data", str(data),
                          "--out", str(tuples), "--json")
    assert code == 0, err
    counts = json.loads(out)["counts"]
    assert counts["sentiment"]["questions"] == 4 * counts["sentiment"]["tuples"] >= 1600
    assert sum(c["tuples"] for k, c in counts.items() if k != "sentiment") >= 100

    report = tmp_path / "table.md"
    code, out, err = _cli(capsys, "bench", "analogy", "run", "-m", str(tiny_model),
                          "--baselines", "glove,random", "--tuples", str(tuples), "--data",
                          str(data), "--json", "--markdown", str(report), "--device", "cpu")
    assert code == 0, err
    result = json.loads(out)
    assert [m["name"] for m in result["models"]] == [tiny_model.name, "glove-bow",
                                                     f"random:{tiny_model.name}"]
    for model in result["models"]:
        assert model["overall"]["questions"] == sum(
            c["questions"] for k, c in counts.items() if k != "sentiment")
        for scores in [model["overall"], *model["categories"].values()]:
            for mode in ("excluding", "including"):
                assert {"top1", "top5", "mrr"} <= set(scores[mode])
    assert set(result["models"][0]["categories"]) == set(counts)
    table = report.read_text(encoding="utf-8")
    assert "| category | questions |" in table and "| sentiment |" in table

    code, out, err = _cli(capsys, "bench", "analogy", "run", "--tuples",
                          str(tmp_path / "none.jsonl"))
    assert code == 3 and err.count("\n") == 1 and "qtsearch bench analogy build" in err
    code, out, err = _cli(capsys, "bench", "analogy", "run", "--baselines", "bert")
    assert code == 2 and "unknown baseline" in err
