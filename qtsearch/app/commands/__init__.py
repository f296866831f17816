"""CLI commands, one module per stage; each module's `register(app)` adds its commands."""

from __future__ import annotations

import importlib

import typer

#: Command modules in the order they appear in `qtsearch --help`.
MODULES = ("demo", "train", "train_nli", "train_pairs", "train_multitask", "adapt", "info",
           "index", "delete", "check", "query", "serve", "evaluate", "bench")


def register_all(app: typer.Typer) -> None:
    for name in MODULES:
        importlib.import_module(f"qtsearch.app.commands.{name}").register(app)
