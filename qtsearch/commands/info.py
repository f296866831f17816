"""`qtsearch info`: describe a model folder or an index folder."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.commands.common import out, print_json
from qtsearch.errors import ModelError
from qtsearch.models.folder import is_model_folder, latest_validation, read_config


def model_info(path: Path) -> dict:
    config = read_config(path)
    val = latest_validation(path) or {}
    return {
        "kind": "model",
        "path": str(path),
        "config": config,
        "val_accuracy": val.get("val_accuracy"),
        "chance": val.get("chance"),
        "step": val.get("step"),
    }


def info(
    path: Path = typer.Argument(..., help="A model folder or an index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show a model's configuration and latest validation metrics, or an index's manifest."""
    if (path / "manifest.json").is_file():
        from qtsearch.commands.index import index_info  # an index folder

        data = index_info(path)
    elif is_model_folder(path) or (path / "config.json").is_file():
        data = model_info(path)
    else:
        raise ModelError(f"{path}: neither a model folder nor an index folder")
    if as_json:
        print_json(data)
        return
    for key, value in data.items():
        out.print(f"[bold]{key}[/bold]: {value}")


def register(app: typer.Typer) -> None:
    app.command()(info)
