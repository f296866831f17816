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

from qtsearch.cli import main

HIT_KEYS = ["id", "score", "text", "source", "line", "doc", "position"]
Q1 = "She was very happy to see him again."
Q2 = "Mr. Knightley said nothing."


def run(capsys, *args: str) -> tuple[int, str, str]:
    """`qtsearch ARGS` in this process: exit code, stdout, stderr."""
    with pytest.raises(SystemExit) as exit_:
        main([*args])
    captured = capsys.readouterr()
    return exit_.value.code or 0, captured.out, captured.err


def test_search_json_is_one_list_of_hits_per_query(capsys, flat, api):
    code, out, err = run(capsys, "search", str(flat), Q1, Q2, "-k", "4", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert len(data) == 2 and all(len(hits) == 4 for hits in data)
    assert all(list(hit) == HIT_KEYS for hits in data for hit in hits)
    assert data == [[h.to_dict() for h in hits] for hits in api.search([Q1, Q2], k=4)]


def test_search_prints_a_table_for_people(capsys, flat, api):
    code, out, _ = run(capsys, "search", str(flat), Q2, "-k", "3")
    assert code == 0
    top = api.search([Q2], k=3)[0]
    assert "score" in out and "sentence" in out
    assert str(top[0].id) in out and f"{top[0].score:.3f}" in out
    assert top[0].text.split()[0] in out


def test_search_reads_queries_from_stdin(capsys, flat, api, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{Q1}\n\n{Q2}\n"))
    code, out, _ = run(capsys, "search", str(flat), "-", "-k", "2", "--json")
    assert code == 0
    assert json.loads(out) == [[h.to_dict() for h in hits]
                               for hits in api.search([Q1, Q2], k=2)]


def test_search_by_ids(capsys, flat, api):
    code, out, _ = run(capsys, "search", str(flat), "--ids", "7", "1200", "-k", "3", "--json")
    assert code == 0
    data = json.loads(out)
    assert [[h["id"] for h in hits] for hits in data] == [
        [h.id for h in hits] for hits in api.search_ids([7, 1200], k=3)]
    assert 7 not in {h["id"] for h in data[0]}


def test_analogy_json_and_keep_inputs(capsys, flat, api):
    a, b, c = (r.text for r in api.get([100, 200, 1300]))
    code, out, _ = run(capsys, "analogy", str(flat), a, a, c, "-k", "3", "--json")
    assert code == 0
    (hits,) = json.loads(out)
    assert len(hits) == 3 and c not in {h["text"] for h in hits}
    code, out, _ = run(capsys, "analogy", str(flat), a, a, c, "-k", "3", "--keep-inputs",
                       "--json")
    assert code == 0
    assert json.loads(out)[0][0]["text"] == c  # c + a − a = c
    code, out, _ = run(capsys, "analogy", str(flat), a, b, c, "-k", "2")
    assert code == 0 and ":: " in out


def test_k_larger_than_the_index_warns_and_returns_everything(capsys, flat, api):
    code, out, err = run(capsys, "search", str(flat), Q1, "-k", "99999", "--json")
    assert code == 0
    assert len(json.loads(out)[0]) == api.count
    assert "larger than the index" in err


@pytest.mark.parametrize(("args", "code", "message"), [
    (["search", "{index}", "Qwxzv Blorptangle"], 3, "vocabulary"),
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


def test_the_installed_command_reports_errors_without_a_traceback(flat, tmp_path):
    """The console script end to end, in its own process."""
    script = Path(sys.executable).with_name("qtsearch")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ok = subprocess.run([str(script), "search", str(flat), Q1, "-k", "2", "--json"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert len(json.loads(ok.stdout)[0]) == 2
    bad = subprocess.run([str(script), "analogy", str(tmp_path / "none"), "a", "b", "c"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 5
    assert bad.stderr.startswith("qtsearch: error:") and "Traceback" not in bad.stderr
