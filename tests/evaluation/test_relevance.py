"""The relevance benchmark: task loading on the real files, metrics against a brute-force
computation, and one task end to end through a real index (mean GloVe: real and fast)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import UnusableIndex, UsageError
from qtsearch.evaluation.data_files import read_lines, read_tsv
from qtsearch.evaluation.relevance.indexes import check_rows, task_index
from qtsearch.evaluation.relevance.relevance_report import table, to_markdown
from qtsearch.evaluation.relevance.relevance_run import (
    System,
    parse_systems,
    run_benchmark,
    run_queries,
)
from qtsearch.evaluation.relevance.tasks_base import (
    RelevanceConfig,
    load_tasks,
    query_metrics,
    resolve_tasks,
)
from qtsearch.lifecycle import Index
from qtsearch.search.searcher import MODES, Searcher


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))


def one_task(shared_data: Path, name: str, limit: int | None = None):
    config = RelevanceConfig(tasks=[name], limit=limit)
    (task,) = load_tasks(config, shared_data)
    return task, config


def test_query_metrics_by_hand() -> None:
    assert query_metrics([5, 3, 7], frozenset({3})) == {
        "R@1": 0.0, "R@10": 1.0, "MRR@10": 0.5, "P@10": 0.1}
    assert query_metrics([3, 9, 4], frozenset({3, 4})) == {
        "R@1": 1.0, "R@10": 1.0, "MRR@10": 1.0, "P@10": 0.2}
    miss = query_metrics(list(range(20)), frozenset({10}))  # 11th hit: beyond k=10
    assert miss == {"R@1": 0.0, "R@10": 0.0, "MRR@10": 0.0, "P@10": 0.0}


def test_stsb_dev_pool_and_queries_follow_the_file(shared_data: Path) -> None:
    task, _ = one_task(shared_data, "STSB-dev")
    rows = read_tsv(shared_data / "sts" / "stsbenchmark" / "sts-dev.csv", (5, 6, 4))
    assert task.pool == list(dict.fromkeys(t for a, b, _ in rows for t in (a, b)))
    expected: dict[str, set[str]] = {}
    for a, b, score in rows:
        if float(score) >= 4 and a != b:
            expected.setdefault(a, set()).add(b)
            expected.setdefault(b, set()).add(a)
    got = {task.pool[q.row]: {task.pool[r] for r in q.relevant} for q in task.queries}
    assert got == expected and len(got) > 400


def test_trec_relevant_questions_share_the_fine_label(shared_data: Path) -> None:
    task, _ = one_task(shared_data, "TREC")
    raw = shared_data / "transfer" / "raw"
    label = {}
    for line in read_lines(raw / "TREC.train") + read_lines(raw / "TREC.test"):
        fine, _, text = line.partition(" ")
        label.setdefault(text.strip(), fine)
    assert task.pool == list(label)
    test_questions = {line.partition(" ")[2].strip() for line in read_lines(raw / "TREC.test")}
    assert {task.pool[q.row] for q in task.queries} == test_questions
    for q in task.queries[:50]:
        want = {i for i, t in enumerate(task.pool)
                if label[t] == label[task.pool[q.row]] and i != q.row}
        assert q.relevant == want


def test_resolve_tasks_names_and_groups() -> None:
    assert [c.name for c in resolve_tasks(["paraphrase"])] == [
        "STSB-train", "STSB-dev", "MSRP", "SICK"]
    assert [c.name for c in resolve_tasks(["trec,stsb-dev"])] == ["STSB-dev", "TREC"]
    assert len(resolve_tasks(["all"])) == 5
    with pytest.raises(UsageError, match="unknown relevance task 'nope'"):
        resolve_tasks(["nope"])


def test_systems_every_mode_once_and_baselines() -> None:
    systems = parse_systems(["default", "my/model"], ["glove", "minilm"])
    labels = [s.label for s in systems]
    assert labels.count("BM25 (lexical)") == 1  # lexical does not depend on the model
    assert labels == [*(f"default · {m}" if m != "lexical" else "BM25 (lexical)"
                        for m in MODES),
                      *(f"model · {m}" for m in MODES if m != "lexical"),
                      "glove · semantic", "minilm · semantic"]
    assert parse_systems([], [], ["minilm:hybrid", "glove"]) == [
        System("minilm", "hybrid"), System("glove", "semantic")]
    with pytest.raises(UsageError, match="mode must be one of"):
        parse_systems([], [], ["glove:fuzzy"])
    reranked = parse_systems([], [], ["glove:hybrid+minilm", "glove:lexical+minilm"])
    assert reranked == [System("glove", "hybrid", "minilm"), System("glove", "lexical", "minilm")]
    assert [s.label for s in reranked] == ["glove · hybrid+minilm", "BM25 (lexical)+minilm"]
    with pytest.raises(UsageError, match="mode must be one of"):
        parse_systems([], [], ["glove:fuzzy+minilm"])
    (deep,) = parse_systems([], [], ["glove:semantic+minilm@10"])
    assert deep == System("glove", "semantic", "minilm", 10)
    assert deep.label == "glove · semantic+minilm@10"
    for bad in ("glove:semantic+minilm@0", "glove:semantic+minilm@x"):
        with pytest.raises(UsageError, match="positive whole number"):
            parse_systems([], [], [bad])


def test_a_reranked_system_reorders_the_first_stage(shared_data: Path) -> None:
    """BM25's hits re-ranked by mean GloVe (a cheap re-ranker): every query answered, and
    the ranking is no longer BM25's (TREC: many relevant questions, so the order shows)."""
    task, config = one_task(shared_data, "TREC", limit=150)
    systems = parse_systems([], [], ["glove:lexical", "glove:lexical+glove"])
    cells = run_benchmark([task], systems, config).results["TREC"]
    plain, reranked = cells["BM25 (lexical)"], cells["BM25 (lexical)+glove"]
    assert reranked["queries"] == plain["queries"] == len(task.queries)
    assert reranked["failed"] == 0 and reranked["P@10"] != plain["P@10"]


def test_metrics_equal_brute_force_on_a_small_pool(shared_data: Path) -> None:
    """Semantic search through a real flat index scores what exhaustive cosine ranking over
    the index's own vectors gives, the query's row excluded."""
    task, _ = one_task(shared_data, "STSB-dev", limit=120)
    from qtsearch.encoders.registry import load_encoder

    glove = load_encoder("glove")
    folder, built = task_index(task, "glove", glove.name, glove.fingerprint)
    assert built
    with Index.open(folder) as index:
        got = run_queries(index, task, "semantic")
    with Searcher.open(folder) as searcher:  # the engine's own vectors, to rank by hand
        stored = searcher.backend.reconstruct(np.arange(searcher.count))
        queries = searcher.embed([task.pool[q.row] for q in task.queries])
    want = {m: [] for m in ("R@1", "R@10", "MRR@10", "P@10")}
    for q, vector in zip(task.queries, queries, strict=True):
        scores = stored @ vector
        scores[q.row] = -np.inf
        order = np.argsort(-scores, kind="stable")[:10]
        good = np.isin(order, list(q.relevant))
        first = int(np.argmax(good)) + 1 if good.any() else 0
        want["R@1"].append(first == 1)
        want["R@10"].append(first > 0)
        want["MRR@10"].append(1 / first if first else 0.0)
        want["P@10"].append(good.sum() / 10)
    for metric, values in want.items():
        assert got[metric] == pytest.approx(float(np.mean(values)), abs=1e-12), metric
    assert got["queries"] == len(task.queries) > 20 and got["failed"] == 0


def test_one_task_end_to_end_through_a_real_index(shared_data: Path) -> None:
    task, config = one_task(shared_data, "STSB-dev", limit=150)
    systems = parse_systems([], [], ["glove:hybrid", "glove:semantic", "glove:lexical"])
    run = run_benchmark([task], systems, config)
    cells = run.results["STSB-dev"]
    assert set(cells) == {"glove · hybrid", "glove · semantic", "BM25 (lexical)"}
    for cell in cells.values():
        assert cell["queries"] == len(task.queries) and cell["failed"] == 0
        assert 0 < cell["R@1"] <= cell["R@10"] <= 1 and cell["R@1"] <= cell["MRR@10"] <= 1
    assert cells["BM25 (lexical)"] != cells["glove · semantic"]
    assert run.builds["STSB-dev|glove-bow"]["built"] is True
    again = run_benchmark([task], systems, config)  # cached: search only
    assert again.builds["STSB-dev|glove-bow"]["built"] is False
    for label, cell in cells.items():
        assert {m: v for m, v in again.results["STSB-dev"][label].items()
                if m != "query_seconds"} == {m: v for m, v in cell.items() if m != "query_seconds"}
    header, rows, best = table(run)
    assert header[2:] == [s.label for s in systems] and rows[0][:2] == ["STSB-dev", "R@1"]
    for row, top in zip(rows, best, strict=True):  # the best figure of each row is marked
        assert top and all(row[i] == max(row[2:], key=float) for i in top)
    text = to_markdown(run)
    assert "| STSB-dev | R@1 |" in text
    assert f"glove-bow: fitted transform {run.builds['STSB-dev|glove-bow']['transform']}" in text
    data = json.loads(json.dumps(run.to_json()))
    assert data["tasks"]["STSB-dev"]["pool"] == len(task.pool)


def test_a_changed_pool_is_caught(shared_data: Path) -> None:
    task, _ = one_task(shared_data, "STSB-dev", limit=40)
    from qtsearch.encoders.registry import load_encoder

    glove = load_encoder("glove")
    folder, _ = task_index(task, "glove", glove.name, glove.fingerprint)
    with Index.open(folder, model=glove) as index:
        check_rows(index, task)
        task.pool[3] = task.pool[3] + " changed"
        with pytest.raises(UnusableIndex, match="differ from the STSB-dev pool"):
            check_rows(index, task)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from qtsearch.app.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_cli_json_and_markdown(shared_data: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "relevance.md"
    code, out, _ = run_cli(["bench", "relevance", "--systems", "glove:semantic,glove:lexical",
                            "-t", "STSB-dev,TREC", "--limit", "200", "--data", str(shared_data),
                            "--markdown", str(md), "--json", "-q"], capsys)
    assert code == 0
    data = json.loads(out)
    assert list(data["results"]) == ["STSB-dev", "TREC"]
    assert set(data["results"]["TREC"]) == {"glove · semantic", "BM25 (lexical)"}
    assert 0 < data["results"]["TREC"]["glove · semantic"]["P@10"] <= 1
    assert data["tasks"]["TREC"]["queries"] > 0 and data["config"]["limit"] == 200
    text = md.read_text(encoding="utf-8")
    assert "| TREC | P@10 |" in text and "queries/s through Index.search" in text


def test_cli_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["bench", "relevance", "-t", "nope"], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("qtsearch: error: unknown")
    code, _, err = run_cli(["bench", "relevance", "--systems", "glove:fuzzy"], capsys)
    assert code == 2 and "mode must be one of" in err


def test_warnings_of_a_query_loop_are_counted_not_printed(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    import logging

    from qtsearch.evaluation.relevance.relevance_run import WarningCounter

    log = logging.getLogger("qtsearch")
    with caplog.at_level(logging.INFO, logger="qtsearch"), WarningCounter().attached() as c:
        log.warning("query %d: most words unknown", 1)
        log.warning("query %d: most words unknown", 2)
        log.info("kept")
    assert c.count == 2 and c.example == "query 1: most words unknown"
    assert [r.getMessage() for r in caplog.records] == ["kept"]


def test_cached_indexes_are_keyed_by_the_encoding_code_too(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to how sentences are encoded (not only to how indexes are built) gives a new
    cache key, so a fixed encoder never scores an index of its old vectors."""
    import shutil

    from qtsearch.core import paths
    from qtsearch.evaluation import vector_cache
    from qtsearch.evaluation.relevance import indexes

    package = tmp_path / "qtsearch"
    shutil.copytree(paths.PACKAGE, package, ignore=shutil.ignore_patterns(
        "__pycache__", "default_model", "demo", "static"))
    monkeypatch.setattr(paths, "PACKAGE", package)
    keys, vector_keys = [], []

    def read_keys() -> None:
        for cached in (indexes.build_code_key, vector_cache._encoding_code_key):
            cached.cache_clear()
        keys.append(indexes.build_code_key())
        vector_keys.append(vector_cache._encoding_code_key())

    for edit in ("encoders/mean.py", "text/tokenizer.py", "indexing/pipeline.py"):
        read_keys()
        with (package / edit).open("a", encoding="utf-8") as fh:
            fh.write("\n# changed\n")
    read_keys()
    for cached in (indexes.build_code_key, vector_cache._encoding_code_key):
        cached.cache_clear()
    assert len(set(keys)) == 4, keys
    # evaluation vectors follow the code that encodes (text, encoders), not the index's
    assert len(set(vector_keys)) == 3 and vector_keys[2] == vector_keys[3], vector_keys
