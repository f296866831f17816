"""The rough edges a new user hit, through the real command line: one-line usage errors, a
readable `info`, a quiet end on a closed pipe, one meaning per short flag, a file for a model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from qtsearch.app.cli import app, main
from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.files import latest_validation, read_config

REPO = Path(__file__).resolve().parents[2]
ENV_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """The CLI in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def one_line_error(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qtsearch: error: "), err
    for w in words:
        assert w in lines[0], (w, err)


@pytest.mark.parametrize(("argv", "words"), [
    (["search", "idx", "q", "--no-such-option"], ["No such option: --no-such-option",
                                                  "qtsearch search --help"]),
    (["nosuchcommand"], ["No such command 'nosuchcommand'", "qtsearch --help"]),
    (["search"], ["Missing argument"]),
    (["eval", "--tasks"], ["--tasks", "requires an argument"]),
    (["bench", "analogy", "run", "--batch-size", "many"], ["--batch-size",
                                                          "qtsearch bench analogy run --help"]),
    (["demo", "--top-k", "x"], ["--top-k"]),
])
def test_usage_errors_are_one_line_and_exit_2(argv, words, capsys) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line_error(err, *words)
    assert "╭" not in err and "Usage:" not in err


def test_usage_error_from_the_installed_entry_point(tmp_path: Path) -> None:
    """The console script's path (a fresh interpreter, no test harness around it)."""
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "info"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    one_line_error(r.stderr, "Missing argument", "qtsearch info --help")


def test_no_arguments_prints_the_help(capsys) -> None:
    code, out, err = run(capsys)
    assert code == 2 and "Usage: qtsearch" in out and "demo" in out and err == ""
    assert run(capsys, "--help")[0] == 0


def _options(group: typer.main.TyperGroup, path: str = "qtsearch"):
    """(command path, option strings) of every option of every command, subcommands included."""
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _options(command, f"{path} {name}")
            continue
        for param in command.params:
            if param.param_type_name == "option":
                yield f"{path} {name}", [*param.opts, *param.secondary_opts]


def test_short_flags_mean_one_thing_and_have_a_long_form() -> None:
    options = list(_options(typer.main.get_command(app)))
    assert len(options) > 50
    for command, opts in options:
        assert any(o.startswith("--") for o in opts), (command, opts)
        if "-m" in opts:
            assert "--model" in opts, (command, opts)
        if "--model" in opts:
            assert "-m" in opts, (command, opts)
        if "-k" in opts:
            assert "--top-k" in opts, (command, opts)
    commands_with_model = {c for c, opts in options if "--model" in opts}
    assert {"qtsearch eval", "qtsearch search", "qtsearch bench analogy run"} <= commands_with_model


def test_info_on_the_shipped_model_is_a_short_summary(capsys) -> None:
    config = read_config(DEFAULT_MODEL)
    val = latest_validation(DEFAULT_MODEL)
    files = config["train"]["corpus"]
    assert len(files) >= 30  # the case the summary is for: many training files
    code, out, err = run(capsys, "info", str(DEFAULT_MODEL))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) < 60, out  # the multi-task model has ~70 training options
    text = " ".join(" ".join(lines).split())
    assert f"val accuracy {val['val_accuracy']:.4g}" in text
    assert f"(at step {val['step']:,})" in text
    assert f"{config['encoder']['vocab_size']:,} words" in text
    assert f"{len(files):,} files in {Path(files[0]).parent}/" in text
    assert "{" not in out and Path(files[0]).name not in out  # no dict reprs, no file list
    # the validation line comes before the long tail of training options
    assert text.index("val accuracy") < text.index("training options")

    code, out, _ = run(capsys, "info", str(DEFAULT_MODEL), "--json")
    data = json.loads(out)
    assert code == 0 and data["config"]["train"]["corpus"] == files  # --json keeps everything
    assert data["val_accuracy"] == val["val_accuracy"] and data["last_step"] >= val["step"]


def test_a_file_given_as_model_says_it_is_a_file(tmp_path: Path, capsys) -> None:
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence here.\nAnother one there.\n")
    for argv in (["build-index", str(corpus), "--model", str(passwd), "--out",
                  str(tmp_path / "idx")],
                 ["eval", "-m", str(passwd), "--tasks", "STS16"],
                 ["info", str(passwd)]):
        code, _, err = run(capsys, *argv)
        assert code == 4, (argv, err)
        one_line_error(err, f"{passwd}: is a file, not a model folder")
        assert "no such" not in err


def test_eval_model_flag_and_markdown_short_flag(tiny_model: Path, shared_data: Path,
                                                 tmp_path: Path, capsys) -> None:
    md = tmp_path / "t.md"
    code, _out, err = run(capsys, "eval", "-m", str(tiny_model), "--tasks", "STS16", "--limit",
                         "40", "--data", str(shared_data), "-M", str(md), "-q")
    assert code == 0, err
    assert md.read_text().splitlines()[0].startswith(f"| task | metric | {tiny_model.name} |")


def _closed_pipe_run(argv: list[str]) -> subprocess.CompletedProcess:
    """Run the CLI with its stdout a pipe whose reader has already gone."""
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **ENV_THREADS})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # every write of the command meets EPIPE
    err = proc.stderr.read().decode()
    return subprocess.CompletedProcess(argv, proc.wait(timeout=600), "", err)


def test_a_closed_pipe_ends_quietly() -> None:
    """Through the Rich console (which would exit 1 on its own), to the interpreter's end."""
    r = _closed_pipe_run(["info", str(DEFAULT_MODEL)])
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_a_closed_pipe_under_plain_json_writes_ends_quietly(monkeypatch, capfd) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    pipe = open(write_end, "w", encoding="utf-8")  # noqa: SIM115 (closed below)
    monkeypatch.setattr(sys, "stdout", pipe)
    with pytest.raises(SystemExit) as exc:
        main(["info", str(DEFAULT_MODEL), "--json"])
    monkeypatch.undo()
    pipe.close()  # stdout's fd now points at /dev/null: closing cannot fail
    assert exc.value.code == 0 and capfd.readouterr().err == ""


@pytest.mark.slow
def test_demo_into_head_ends_quietly_and_leaves_a_whole_index(tmp_path: Path) -> None:
    """`qtsearch demo | head -2` on a fresh install: the index is built (progress on stderr),
    the two lines are shown, and nothing half-written stays behind."""
    out = tmp_path / "demo"
    script = f"{sys.executable} {REPO / 'cli.py'} demo --out {out} --top-k 3 | head -2; " \
             "echo \"status ${PIPESTATUS[*]}\""
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600,
                       env={**os.environ, **ENV_THREADS})
    lines = r.stdout.splitlines()
    assert lines[-1] == "status 0 0", (r.stdout, r.stderr)
    assert lines[0].startswith("search: The army") and len(lines) == 3
    assert "error" not in r.stderr and "Traceback" not in r.stderr
    assert (out / "manifest.json").is_file() and not (tmp_path / "demo.partial").exists()
    again = _closed_pipe_run(["demo", "--out", str(out)])  # reuses the index; EPIPE at once
    assert again.returncode == 0 and "error" not in again.stderr, again.stderr
    whole = subprocess.run([sys.executable, str(REPO / "cli.py"), "demo", "--out", str(out)],
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, **ENV_THREADS})
    lines = whole.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if line.startswith("analogy: "))
    assert "album" in lines[at + 1].split("\t")[3]  # the song → album swap is answered
    note = next(line for line in lines[at:] if line.startswith("analogies add B - A"))
    assert "bench analogy" in note  # one line, piped: what the benchmark measures


def test_info_on_an_index_leads_with_what_a_reader_looks_for(flat: Path, capsys) -> None:
    code, out, err = run(capsys, "info", str(flat))
    assert code == 0, err
    labels = [line.split()[0] for line in out.splitlines() if line and not line.startswith(" ")]
    assert labels[:3] == ["index", "sentences", "index"] and "{" not in out
    code, out, _ = run(capsys, "info", str(flat), "--json")
    data = json.loads(out)
    assert data["kind"] == "index" and isinstance(data["corpus"], list) and data["count"] > 0


def test_each_command_module_registers_the_commands_it_is_listed_with() -> None:
    """COMMANDS tells which module to import for a command without importing any: it must
    name every command each module registers, no more."""
    import importlib

    from qtsearch.app.commands import COMMANDS, MODULES

    assert tuple(COMMANDS) == MODULES
    for module, names in COMMANDS.items():
        one = typer.Typer()
        importlib.import_module(f"qtsearch.app.commands.{module}").register(one)
        got = [c.name or c.callback.__name__.replace("_", "-") for c in one.registered_commands] + \
              [g.name or g.typer_instance.info.name for g in one.registered_groups]
        assert sorted(got) == sorted(names), module


def test_a_search_imports_its_command_module_alone(shipped_index: Path) -> None:
    """A one-shot `qtsearch search` registers the query commands only: the training options
    and configs and the other commands' modules stay unimported."""
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("
            "('qtsearch.app.commands.', 'qtsearch.training'))), "
            "file=sys.stderr))\n"
            "from qtsearch.app.cli import main\n"
            f"main(['search', {str(shipped_index)!r}, 'Emma was happy.', '-k', '1'])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, **ENV_THREADS}, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stderr.strip().splitlines()[-1])  # the list printed at exit
    assert loaded == ["qtsearch.app.commands.common", "qtsearch.app.commands.query"], loaded
