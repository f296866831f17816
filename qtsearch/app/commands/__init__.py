"""CLI commands, one module per stage; each module's `register(app)` adds its commands."""

from __future__ import annotations

import importlib

import typer

#: Command modules in the order they appear in `qtsearch --help`.
MODULES = ("demo", "train", "train_nli", "train_pairs", "train_multitask", "adapt", "info",
           "index", "delete", "check", "query", "serve", "evaluate", "bench")

#: The commands each module registers, known without importing it: a run of one command
#: imports that command's module alone (a one-shot `qtsearch search` skips the training
#: options and the index chooser). tests/app/test_cli_edges.py keeps it in step with MODULES.
COMMANDS = {"demo": ("demo",), "train": ("train",), "train_nli": ("train-nli",),
            "train_pairs": ("train-pairs",), "train_multitask": ("train-multitask",),
            "adapt": ("adapt",), "info": ("info",), "index": ("build-index", "add", "export"),
            "delete": ("delete",), "check": ("check",), "query": ("search", "analogy", "shell"),
            "serve": ("serve",), "evaluate": ("eval",), "bench": ("bench",)}


def modules_for(argv: list[str]) -> tuple[str, ...]:
    """The command modules a run of `qtsearch ARGV` needs: the one that defines the command
    named first, or all (help, --version, a mistyped command: they list every command)."""
    for module, commands in COMMANDS.items():
        if argv and argv[0] in commands:
            return (module,)
    return MODULES


def register_all(app: typer.Typer, modules: tuple[str, ...] = MODULES) -> None:
    for name in modules:
        importlib.import_module(f"qtsearch.app.commands.{name}").register(app)
