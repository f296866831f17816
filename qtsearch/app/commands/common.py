"""Printing helpers and the options shared by the command modules (one spelling everywhere)."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

from qtsearch.search.defaults import RERANK_DEPTH


class _Stdout(Console):
    """Rich's console exits 1 on a closed pipe; this one lets the BrokenPipeError through, so
    the CLI ends the command quietly in one place (qtsearch.app.cli)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


#: Human output goes to stdout; progress bars and warnings go to stderr.
out: Console = _Stdout()
err = Console(stderr=True)


def print_json(data: Any) -> None:
    """Machine-readable output: plain JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def counted(n: int, noun: str) -> str:
    """A count with its noun in the right number: "1 sentence", "2 sentences"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def model_option(help: str = "Model folder (default: the shipped model).") -> Any:
    """`-m/--model` means the model in every command."""
    return typer.Option(None, "--model", "-m", help=help)


def top_k_option(default: int, help: str = "Results per query.") -> Any:
    """`-k/--top-k`: how many results, in every command that ranks."""
    return typer.Option(default, "--top-k", "-k", help=help)


#: `--rerank-depth` of search, shell and serve.
RERANK_DEPTH_OPT = typer.Option(RERANK_DEPTH, "--rerank-depth", min=1,
                                help="First-stage hits re-scored per query with --rerank "
                                     "(deeper finds more, costs more).")
