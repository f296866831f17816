"""mkdocs hook: the CLI reference page is filled with every command's `--help`, read from the
installed CLI at build time, so the page cannot drift from the code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

MARKER = "<!-- cli-help -->"

# Runs in a child process: TYPER_USE_RICH=0 must be set before typer is imported, and the
# documentation build must not import the package into its own process.
_SCRIPT = r"""
import json, sys
import typer
from typer.testing import CliRunner
from qtsearch.app.cli import app

root = typer.main.get_command(app)
runner = CliRunner()
out = []

def walk(cmd, path):
    result = runner.invoke(app, [*path, "--help"], prog_name="qtsearch", terminal_width=100)
    if result.exit_code != 0:
        sys.exit(f"qtsearch {' '.join(path)} --help failed: {result.output}")
    out.append([" ".join(path), result.output])
    if hasattr(cmd, "list_commands"):  # a group (typer may vendor its own click)
        ctx = cmd.context_class(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                walk(sub, [*path, name])

walk(root, [])
print(json.dumps(out))
"""


def _help_texts() -> list[tuple[str, str]]:
    env = {**os.environ, "TYPER_USE_RICH": "0", "COLUMNS": "100", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"reading the CLI's help failed:\n{done.stderr}")
    return [tuple(pair) for pair in json.loads(done.stdout)]


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Fill the page that holds MARKER with every command's help, one section each."""
    if MARKER not in markdown:
        return markdown
    parts = []
    for path, text in _help_texts():
        if not path:
            continue
        parts.append(f"## `qtsearch {path}`\n\n```text\n{text.rstrip()}\n```\n")
    return markdown.replace(MARKER, "\n".join(parts))
