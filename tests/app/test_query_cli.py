"""`qtsearch search` and `qtsearch analogy` through the real CLI on a real index."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qtsearch.app.cli import main

HIT_KEYS = ["id", "score", "text", "source", "line", "doc", "position", "legs"]
ANSWER_KEYS = ["query", "hits", "note", "error"]
Q1 = "She was very happy to see him again."
Q2 = "Mr. Knightley said nothing."


def run(capsys, *args: str) -> tuple[int, str, str]:
    """`qtsearch ARGS` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exit_:
        main([*args])
    captured = capsys.readouterr()
    return exit_.value.code or 0, captured.out, captured.err


def _hits(data: list[dict]) -> list[list[dict]]:
    return [answer["hits"] for answer in data]


def _same(got: list[dict], hits) -> None:
    """JSON hits equal to API hits; scores to 1e-5: the CLI's own Index encodes the query
    with per-word projections computed in other batches than the shared `api` did, which
    moves vectors in the last bits."""
    want = [h.to_dict() for h in hits]
    assert [{**g, "score": 0, "legs": None} for g in got] == [
        {**w, "score": 0, "legs": None} for w in want]
    for g, w in zip(got, want, strict=True):
        assert g["score"] == pytest.approx(w["score"], abs=1e-5)
        assert g["legs"] == pytest.approx(w["legs"], abs=1e-5)


def test_search_json_is_one_answer_per_query(capsys, flat, api):
    code, out, err = run(capsys, "search", str(flat), Q1, Q2, "-k", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert [list(a) for a in data] == [ANSWER_KEYS] * 2
    assert [a["query"] for a in data] == [Q1, Q2]
    assert all(len(a["hits"]) == 4 and a["note"] is None and a["error"] is None for a in data)
    assert all(list(hit) == HIT_KEYS for hits in _hits(data) for hit in hits)
    for got, q in zip(_hits(data), (Q1, Q2), strict=True):
        _same(got, api.search([q], k=4)[0])
    assert all(set(hit["legs"]) == {"semantic", "lexical"} for hit in data[0]["hits"])


@pytest.mark.parametrize("mode", ["semantic", "lexical", "hybrid"])
def test_search_modes_and_filters(capsys, flat, api, mode):
    code, out, _ = run(capsys, "search", str(flat), Q1, "--mode", mode, "--where", "doc=1",
                       "--where", "source=austen.txt", "--top-k", "3", "--json")
    assert code == 0
    (answer,) = json.loads(out)
    want = api.search(Q1, k=3, mode=mode, where={"doc": 1, "source": "austen.txt"})[0]
    _same(answer["hits"], want)
    assert all(h["doc"] == 1 for h in answer["hits"])
    assert set(answer["hits"][0]["legs"]) == ({"semantic", "lexical"} if mode == "hybrid"
                                              else {mode})


def test_k_has_a_short_a_long_and_the_old_spelling(capsys, flat):
    for flag in ("-k", "--top-k", "--k"):
        code, out, _ = run(capsys, "search", str(flat), Q1, flag, "2", "--json")
        assert code == 0 and len(json.loads(out)[0]["hits"]) == 2


def test_a_mostly_foreign_query_is_flagged_on_stderr_and_in_json(capsys, flat):
    query = "Quelle journée magnifique pour Emma à Hartfield"
    code, out, err = run(capsys, "search", str(flat), query, "--json")
    assert code == 0
    (answer,) = json.loads(out)
    assert "unknown to the model" in answer["note"] and answer["hits"]
    assert err.count("unknown to the model") == 1 and len(err.strip().splitlines()) == 1


def test_search_prints_a_table_for_people(flat, api):
    """On a terminal (Rich's TTY_COMPATIBLE says stdout is one): a table. Piped, one line a
    hit (tests/app/test_messages.py)."""
    from cli_helpers import ENV, cli

    r = cli("search", str(flat), Q2, "-k", "3", env={**ENV, "TTY_COMPATIBLE": "1"})
    code, out = r.returncode, r.stdout
    assert code == 0, r.stderr
    assert "│" in out  # the table's rules
    top = api.search([Q2], k=3)[0]
    assert "score" in out and "sentence" in out
    assert str(top[0].id) in out and f"{top[0].score:.3f}" in out
    assert top[0].text.split()[0] in out


def test_search_reads_queries_from_stdin_one_answer_per_line(capsys, flat, api, monkeypatch):
    """A blank line keeps its place: answer i is about line i (blank: an error)."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{Q1}\n\n{Q2}\n"))
    code, out, err = run(capsys, "search", str(flat), "-", "-k", "2", "--json")
    assert code == 3
    data = json.loads(out)
    assert [a["query"] for a in data] == [Q1, "", Q2]
    assert data[1]["hits"] == [] and "empty query" in data[1]["error"]
    _same(data[0]["hits"], api.search([Q1], k=2)[0])
    _same(data[2]["hits"], api.search([Q2], k=2)[0])
    assert err.count("qtsearch: error: empty query") == 1
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{Q1}\n\n{Q2}\n"))
    code, out, err = run(capsys, "search", str(flat), "-", "-k", "1")
    assert code == 3 and out.index(Q1[:20]) < out.index(Q2[:20])
    assert "empty query" in err


def test_search_by_ids(capsys, flat, api):
    # a sentence of its own words: a heading such as "Chapter 4" has many copies at score 1.0,
    # whose order among themselves is arbitrary
    other = next(r.id for r in api.get(list(range(1200, 1300))) if len(r.text.split()) >= 8)
    code, out, _ = run(capsys, "search", str(flat), "--ids", "7", str(other), "-k", "3",
                       "--json")
    assert code == 0
    data = _hits(json.loads(out))
    assert [[h["id"] for h in hits] for hits in data] == [
        [h.id for h in hits] for hits in api.search_ids([7, other], k=3)]
    assert 7 not in {h["id"] for h in data[0]}
    code, out, _ = run(capsys, "search", str(flat), "--ids", "7", "-k", "3")
    assert code == 0 and f"neighbours of 7: {api.get([7])[0].text[:20]}" in out


def test_analogy_json_and_keep_inputs(capsys, flat, api):
    a, b, c = (r.text for r in api.get([100, 200, 1300]))
    code, out, _ = run(capsys, "analogy", str(flat), a, a, c, "-k", "3", "--json")
    assert code == 0
    (hits,) = _hits(json.loads(out))
    assert len(hits) == 3 and c not in {h["text"] for h in hits}
    code, out, _ = run(capsys, "analogy", str(flat), a, a, c, "-k", "3", "--keep-inputs",
                       "--json")
    assert code == 0
    assert json.loads(out)[0]["hits"][0]["text"] == c  # c + a − a = c
    code, out, _ = run(capsys, "analogy", str(flat), a, b, c, "-k", "2")
    assert code == 0 and ":: " in out


def test_k_larger_than_the_index_warns_and_returns_everything(capsys, flat, api):
    code, out, err = run(capsys, "search", str(flat), Q1, "-k", "99999", "--json")
    assert code == 0
    # every stored text once (a text stored twice is shown once)
    texts = {" ".join(r.text.casefold().split()) for r in api.get(range(api.count))}
    assert len(json.loads(out)[0]["hits"]) == len(texts)
    assert "larger than the index" in err


@pytest.mark.parametrize(("args", "code", "message"), [
    (["search", "{index}", "Qwxzv Blorptangle", "--mode", "semantic"], 3, "vocabulary"),
    (["search", "{index}", Q1, "--mode", "fuzzy"], 2, "unknown search mode"),
    (["search", "{index}", Q1, "--where", "colour=red"], 2, "cannot filter on"),
    (["search", "{index}", Q1, "--where", "doc"], 2, "COLUMN=VALUE"),
    (["search", "{index}", "   "], 3, "empty query"),
    (["search", "{index}", Q1, "-k", "0"], 2, "at least 1"),
    (["search", "{index}", "--ids", "abc"], 2, "not a sentence id"),
    (["search", "{index}", "--ids", "123456"], 3, "no sentence with id"),
    (["search", "{index}", Q1, "--param", "nprobe=4"], 2, "do not apply"),
    (["search", "{index}", Q1, "--param", "nprobe"], 2, "NAME=NUMBER"),
    (["analogy", "{index}", Q1, "", Q2], 3, "empty query"),
    (["search", "{missing}", Q1], 5, "no such index folder"),
    (["analogy", "{missing}", Q1, Q2, Q1], 5, "no such index folder"),
])
def test_failures_are_one_line_and_an_exit_code(capsys, flat, tmp_path, args, code, message):
    argv = [a.format(index=flat, missing=tmp_path / "missing") for a in args]
    got, _, err = run(capsys, *argv)
    assert got == code
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_another_model_is_refused(capsys, flat, tmp_path):
    manifest = json.loads((flat / "manifest.json").read_text())
    other = tmp_path / "index"
    shutil.copytree(flat, other)
    manifest["model"]["fingerprint"] = "0123456789abcdef"
    (other / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = run(capsys, "search", str(other), Q1)
    assert code == 4 and "fingerprint" in err


@pytest.mark.slow
def test_the_installed_command_reports_errors_without_a_traceback(flat, tmp_path):
    """The console script end to end, in its own process."""
    script = Path(sys.executable).with_name("qtsearch")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ok = subprocess.run([str(script), "search", str(flat), Q1, "-k", "2", "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)[0]["hits"]) == 2
    bad = subprocess.run([str(script), "analogy", str(tmp_path / "none"), "a", "b", "c"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 5
    assert bad.stderr.startswith("qtsearch: error:") and "Traceback" not in bad.stderr
