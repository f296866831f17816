"""Start-up: the CLI parses before it imports the heavy libraries (torch alone takes seconds),
and every command still runs once it has parsed. Speed itself is measured by
benchmarks/startup.py, not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: Libraries `qtsearch --help` (and the import of the CLI) must not load.
HEAVY = ("torch", "faiss", "sqlalchemy", "pyarrow", "numba", "numpy")

#: Runs qtsearch.cli.main on each argv of argv[1] (JSON) in this process, then prints which of
#: HEAVY were imported.
PROBE = """
import json, sys
from qtsearch.cli import main
for argv in json.loads(sys.argv[1]):
    try:
        main(argv)
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)),
      file=sys.stderr)
"""


def heavy_imports(argvs: list[list[str]]) -> list[str]:
    """The HEAVY libraries loaded by running these command lines in one fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs), json.dumps(HEAVY)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_importing_the_cli_loads_none_of_the_heavy_libraries() -> None:
    code = (f"import sys, qtsearch, qtsearch.cli; loaded = [m for m in {HEAVY!r} "
            "if m in sys.modules]; assert loaded == [], loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_help_of_every_command_loads_none_of_the_heavy_libraries() -> None:
    from typer.main import get_command

    from qtsearch.cli import app

    group = get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert {"search", "build-index", "train", "eval", "serve"} <= set(names)
    argvs = [["--help"], *([name, "--help"] for name in names)]
    argvs += [["bench", "analogy", "--help"], ["bench", "relevance", "--help"]]
    assert heavy_imports(argvs) == []


def test_a_usage_error_loads_none_of_the_heavy_libraries() -> None:
    assert heavy_imports([["search"], ["build-index", "--index"], ["nope"]]) == []


def test_the_fit_default_of_build_index_is_the_library_default() -> None:
    """commands/index.py writes "auto" out so as not to import numpy for it."""
    from typer.main import get_command

    from qtsearch.cli import app
    from qtsearch.index.transform import DEFAULT_FIT

    build = get_command(app).commands["build-index"]  # type: ignore[attr-defined]
    assert next(p.default for p in build.params if p.name == "fit") == DEFAULT_FIT


def qtsearch(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The installed entry point's code path (`python -m qtsearch`), in a fresh process."""
    return subprocess.run([sys.executable, "-m", "qtsearch", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_lazy_commands_still_build_search_and_train(tmp_path: Path,
                                                        emma_lines: Path) -> None:
    """One process per command, as a user runs them: each imports what it needs itself."""
    index = tmp_path / "emma"
    built = qtsearch("build-index", emma_lines, "-o", index, "-q", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "index of 900 sentences" in built.stdout

    found = qtsearch("search", index, "Emma was very happy.", "-k", "3", "--json", cwd=tmp_path)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)[0]["hits"]
    assert len(hits) == 3 and all(h["source"].endswith("emma.txt") for h in hits)

    # the shipped model is a mean of words: no compiled GRU paths, so no numba (~0.5 s)
    loaded = heavy_imports([["search", str(index), "Emma was very happy.", "--json"]])
    assert "torch" in loaded and "numba" not in loaded and "pyarrow" not in loaded

    about = qtsearch("info", index, "--json", cwd=tmp_path)
    assert about.returncode == 0 and json.loads(about.stdout)["count"] == 900

    model = tmp_path / "model"  # the training commands build their config after parsing
    trained = qtsearch("train", emma_lines, "-o", model, "--max-steps", "2", "--hidden", "16",
                       "--word-dim", "8", "--vocab-size", "300", "--batch-size", "20",
                       "--val-every", "2", "--device", "cpu", "-q", cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert json.loads((model / "config.json").read_text())["encoder"]["hidden"] == 16
