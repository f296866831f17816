"""The README's test command is what CI runs and installs what the tests need."""

from __future__ import annotations

import re
import subprocess

import tomllib
from conftest import REPO
from readme_commands import TEST_MARKER, readme_test_command


def _extras() -> dict[str, list[str]]:
    with (REPO / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_test_command" in ci and 'bash -c "$command"' in ci
    printed = subprocess.run(
        ["bash", "-c", ci.split("command=", 1)[1].split("\n", 1)[0].strip()[2:-1]],
        cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    assert printed == readme_test_command(REPO / "README.md")


def test_the_test_command_installs_every_extra_the_tests_use() -> None:
    command = readme_test_command(REPO / "README.md")
    assert command.startswith("pip install torch==2.13.0 && ")
    assert '".[dev]"' in command and command.endswith("pytest -q")
    extras = _extras()
    (dev,) = extras["dev"]
    named = set(re.fullmatch(r"qtsearch\[(.*)\]", dev).group(1).split(","))
    # every extra but the aliases of others and the docs site's tools reaches the tests
    wanted = {name for name, deps in extras.items()
              if name not in {"dev", "docs"} and not all(d.startswith("qtsearch[") for d in deps)}
    assert wanted <= named, f"the dev extra misses {sorted(wanted - named)}"


def test_the_marker_stands_once() -> None:
    assert (REPO / "README.md").read_text(encoding="utf-8").count(TEST_MARKER) == 1
