"""Re-ranking (qtsearch.search.rerank): all-MiniLM-L6-v2 re-scores the first hits of the real
Austen test index, checked against MiniLM's cosines computed here, through Python and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qtsearch.app.cli import main
from qtsearch.app.commands.common import RERANK_DEPTH_OPT
from qtsearch.core.errors import UsageError
from qtsearch.search.defaults import RERANK_DEPTH, RERANK_WEIGHT
from qtsearch.search.rerank import Reranker

QUERY = "She was very happy to see him again."


@pytest.fixture(scope="module")
def minilm() -> Reranker:
    return Reranker("minilm", depth=12)


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main([*args])
    captured = capsys.readouterr()
    return exit_.value.code or 0, captured.out, captured.err


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
@pytest.mark.parametrize("weight", [RERANK_WEIGHT, 1.0])
def test_reranked_hits_are_the_first_hits_in_the_fused_order(api, minilm, mode, weight):
    """The score is (1 - weight) · z(first stage) + weight · z(MiniLM's cosine), each z over the
    re-ranked hits, computed here from MiniLM's own vectors; weight 1: the cosine alone."""
    first = api.search(QUERY, 12, mode)[0]
    got = api.search(QUERY, 5, mode, rerank=minilm.deeper(12) if weight == minilm.weight
                     else Reranker(minilm.encoder, 12, weight=weight))[0]
    # the re-ranker's own encoder (int8 through ONNX Runtime where installed), in one call
    # of the same texts as the re-ranker's
    vectors = minilm.encoder.encode([QUERY, *(h.text for h in first)], normalize=True)
    cosines = (vectors[1:] @ vectors[0]).astype(np.float64)
    firsts = np.array([h.score for h in first])

    def z(x: np.ndarray) -> np.ndarray:
        return (x - x.mean()) / x.std()

    fused = cosines if weight == 1.0 else (1 - weight) * z(firsts) + weight * z(cosines)
    want = np.argsort(-fused, kind="stable")[:5]
    assert [h.id for h in got] == [first[j].id for j in want]
    np.testing.assert_allclose([h.score for h in got], fused[want], atol=1e-4)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    for h in got:
        j = next(i for i, f in enumerate(first) if f.id == h.id)
        assert h.legs["first"] == first[j].score
        assert h.legs["rerank"] == pytest.approx(cosines[j], abs=1e-5)
        assert {k: v for k, v in h.legs.items() if k not in ("first", "rerank")} == first[j].legs


def test_onnx_runtime_reranks_as_torch_does(api, minilm):
    """MiniLM's float graph in ONNX Runtime re-ranks every hit of every query in torch's
    order, with torch's scores; the re-ranker loaded by name runs the int8 graph, whose
    vectors stay within a cosine of 0.95 of torch's."""
    pytest.importorskip("onnxruntime", reason="ONNX Runtime not installed")
    from qtsearch.encoders.baselines import MiniLM

    on_torch = Reranker(MiniLM("cpu", runtime="torch"), depth=12)
    on_onnx = Reranker(MiniLM("cpu", runtime="onnx"), depth=12)
    queries = [QUERY, "Mr. Knightley said nothing.", "It rained all day.", "a letter"]
    first = [api.search(q, 12)[0] for q in queries]
    for got, want in zip(on_onnx(queries, first, 12), on_torch(queries, first, 12),
                         strict=True):
        assert [h.id for h in got] == [h.id for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-4)
    assert minilm.encoder.runtime == "onnx" and minilm.encoder.int8
    texts = [QUERY, *(h.text for hits in first for h in hits)]
    int8 = minilm.encoder.encode(texts, normalize=True)
    assert minilm.encoder._onnx.path.name.endswith("-int8.onnx")
    assert np.min(np.einsum("ij,ij->i", int8, on_torch.encoder.encode(texts, normalize=True))
                  ) >= 0.95


def test_reranking_finds_what_the_first_stage_ranked_lower(api, minilm):
    """Depth 12 reaches beyond the first stage's top 3: some reranked top-3 hit came from there
    for at least one of these queries (else re-ranking would be a no-op on this index)."""
    queries = [QUERY, "Mr. Knightley said nothing.", "It rained all day.", "a letter"]
    moved = 0
    for q in queries:
        top3 = {h.id for h in api.search(q, 3)[0]}
        moved += any(h.id not in top3 for h in api.search(q, 3, rerank=minilm)[0])
    assert moved >= 1


def test_bad_depth_and_filters(api, minilm):
    with pytest.raises(UsageError, match="at least 1"):
        Reranker("minilm", depth=0)
    for weight in (-0.1, 1.5):
        with pytest.raises(UsageError, match="between 0 and 1"):
            Reranker(minilm.encoder, weight=weight)
    assert RERANK_DEPTH_OPT.default == RERANK_DEPTH  # the CLI reads the library's
    hits = api.search(QUERY, 4, where={"doc": 1}, rerank=minilm)[0]
    assert hits and all(h.doc == 1 for h in hits)


def test_cli_rerank(capsys, flat):
    code, out, _ = run(capsys, "search", str(flat), QUERY, "-k", "3", "--rerank", "minilm",
                       "--rerank-depth", "8", "--json")
    assert code == 0
    hits = json.loads(out)[0]["hits"]
    assert len(hits) == 3 and all({"first", "rerank"} <= set(h["legs"]) for h in hits)
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    code, _, err = run(capsys, "search", str(flat), "3", "--ids", "--rerank", "minilm")
    assert code == 2 and err.count("\n") == 1 and "--ids" in err
    code, _, err = run(capsys, "search", str(flat), QUERY, "--rerank", str(flat / "nothing"))
    assert code != 0 and err.startswith("qtsearch: error:") and err.count("\n") == 1


def test_cli_explains_a_reranked_hit_by_its_two_fused_scores(capsys, flat):
    args = ("search", str(flat), QUERY, "-k", "3", "--rerank", "minilm", "--rerank-depth", "8")
    code, out, _ = run(capsys, *args, "--json")
    assert code == 0
    legs = [(h["legs"]["first"], h["legs"]["rerank"]) for h in json.loads(out)[0]["hits"]]
    code, out, _ = run(capsys, *args, "--explain")
    assert code == 0
    why = out.split("why\n", 1)[1].splitlines()
    assert [row.split("\t")[1:3] for row in why[:3]] == [[f"{f:.3f}", f"{r:.3f}"]
                                                          for f, r in legs]
    assert why[3].startswith(f"score = {1 - RERANK_WEIGHT:.2f} × z(first stage) + "
                             f"{RERANK_WEIGHT:.2f} × z(re-ranker's cosine)")


@pytest.mark.slow
def test_shell_rerank(flat, api, minilm, tmp_path):
    from shell_helpers import ask, leave, spawn

    child = spawn(flat, tmp_path / "hist", "-k", "3", "--rerank", "minilm", "--rerank-depth",
                  "12")
    shown = ask(child, QUERY)
    assert all(f" {h.id} " in shown for h in api.search(QUERY, 3, rerank=minilm)[0])
    assert "rerank: off" in ask(child, ":rerank off")
    assert "usage: :rerank" in ask(child, ":rerank")
    assert "rerank: minilm, first 5 hits" in ask(child, ":rerank minilm 5")
    leave(child)


def test_http_rerank_is_the_cli_json(capsys, flat):
    httpx = pytest.importorskip("httpx")
    from serve_fixtures import serving

    code, out, _ = run(capsys, "search", str(flat), QUERY, "-k", "3", "--rerank", "minilm",
                       "--json")
    assert code == 0
    want = json.loads(out)[0]["hits"]
    with serving(flat, rerank="minilm") as url:
        got = httpx.get(f"{url}/search", params={"q": QUERY, "k": 3, "rerank": "true"},
                        timeout=120)
        assert got.status_code == 200
        hits = got.json()[0]["hits"]
        assert [h["id"] for h in hits] == [h["id"] for h in want]
        np.testing.assert_allclose([h["score"] for h in hits], [h["score"] for h in want],
                                   atol=1e-5)
        posted = httpx.post(f"{url}/search", json={"q": QUERY, "k": 3, "rerank": True},
                            timeout=120)
        assert [h["id"] for h in posted.json()[0]["hits"]] == [h["id"] for h in want]
        refused = httpx.get(f"{url}/search", params={"q": "3", "ids": "true", "rerank": "true"})
        assert refused.status_code == 400 and "not ids" in refused.json()["error"]
    with serving(flat) as url:
        refused = httpx.get(f"{url}/search", params={"q": QUERY, "rerank": "true"})
        assert refused.status_code == 400 and "--rerank" in refused.json()["error"]
