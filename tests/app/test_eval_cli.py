"""`qtsearch eval` end to end: JSON and Markdown output, and one-line errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qtsearch.app.cli import main

SMALL_BOOK = "gutenberg/0744-ibsen-henrik--little-eyolf.txt.gz"


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_json_has_results_per_encoder_task_and_metric(tiny_model, shared_data, capsys):
    code, out, _ = run_cli(
        ["eval", str(tiny_model), "--baselines", "glove", "--tasks", "MR,SICK-R,STS16,NextSent",
         "--limit", "120", "--queries", "100", "--books", str(shared_data / SMALL_BOOK),
         "--data", str(shared_data), "--json", "-q", "--no-cache"], capsys)
    assert code == 0
    data = json.loads(out)
    model = Path(tiny_model).name
    assert list(data["results"]) == [model, "glove-bow"]
    for name in (model, "glove-bow"):
        assert list(data["results"][name]) == ["MR", "SICK-R", "STS16", "NextSent"]
        assert 0 <= data["results"][name]["MR"]["acc"] <= 100
        assert data["encoders"][name]["dim"] in (128, 50)
    assert "fg_top1" in data["results"][model]["NextSent"]
    assert "fg_top1" not in data["results"]["glove-bow"]["NextSent"]  # only QT models have f, g
    assert data["reference"]["InferSent (AllNLI)"]["MR"] == {"acc": 81.1}
    assert "SUBJ" not in data["reference"]["InferSent (AllNLI)"]  # only the tasks that ran
    assert data["config"]["limit"] == 120


def test_markdown_table_and_rich_table(tiny_model, shared_data, tmp_path, capsys):
    md = tmp_path / "eval.md"
    code, out, _ = run_cli(["eval", str(tiny_model), "--tasks", "STS13,TREC", "--limit", "100",
                            "--data", str(shared_data), "--markdown", str(md), "-q",
                            "--no-cache"], capsys)
    assert code == 0
    assert "TREC" in out and "STS13" in out and "InferSent" in out  # the Rich table
    lines = md.read_text().splitlines()
    assert lines[0].startswith(f"| task | metric | {Path(tiny_model).name} | QT paper")
    assert lines[2].startswith("| TREC | acc | ") and lines[3].startswith("| STS13 | ")
    assert lines[2].endswith("| 92.4 | 88.2 |")


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--tasks", "nosuchtask"], 2, "unknown task 'nosuchtask'"),
        (["--limit", "3"], 2, "--limit must be at least 10"),
        (["--solver", "newton"], 2, "unknown --solver 'newton'"),
        (["--data", "/nonexistent/data"], 3, "data folder not found"),
        (["--books", "/nonexistent/book.txt", "--tasks", "NextSent"], 3, "no such file"),
        # a small sample leaves a class too rare for 10-fold cross-validation (MR, real data)
        (["--limit", "10", "--tasks", "MR", "--no-cache"], 2,
         "10-fold cross-validation needs 10 examples of every class"),
    ],
)
def test_bad_input_is_one_line_and_exit_code(tiny_model, argv, code, message, capsys):
    got, _, err = run_cli(["eval", str(tiny_model), *argv], capsys)
    assert got == code
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("solver", ["lbfgs", "sklearn"])
def test_a_small_limit_holds_out_without_stratifying_every_class(tiny_model, shared_data,
                                                                  solver, capsys):
    """TREC's 6 classes in 25 examples: a 3-example held-out part cannot hold every class, so
    the probe's held-out part is drawn plainly at random instead of failing."""
    argv = ["eval", str(tiny_model), "--tasks", "TREC", "--limit", "25", "--solver", solver,
            "--no-cache", "--json"]
    got, out, err = run_cli(argv, capsys)
    assert got == 0, err
    assert 0 <= json.loads(out)["results"][Path(tiny_model).name]["TREC"]["acc"] <= 100


def test_missing_model_is_model_error(tmp_path, capsys):
    got, _, err = run_cli(["eval", str(tmp_path / "no-model"), "--tasks", "STS16"], capsys)
    assert got == 4 and "no such model folder" in err
