"""`qtsearch info`: describe a model folder or an index folder.

The table is a summary a person reads at a glance (lists become counts: a model trained on 740
books shows "740 files", not 740 lines); `--json` keeps every field.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from qtsearch.app.commands.common import out, print_json
from qtsearch.core.errors import ModelError, UsageError

# qtsearch.encoders.nn.folder (torch) and an index's info (index_info: numpy, faiss) are
# imported where used, so that the other commands start without them.


def model_info(path: Path) -> dict[str, Any]:
    """Everything known about a model folder: its config, latest validation and last step."""
    from qtsearch.encoders.files import latest_validation, read_config, read_metrics

    config = read_config(path)
    val = latest_validation(path) or {}
    steps = [r["step"] for r in read_metrics(path) if isinstance(r.get("step"), int)]
    return {
        "kind": "model",
        "path": str(path),
        "config": config,
        "val_accuracy": val.get("val_accuracy"),
        "chance": val.get("chance"),
        "step": val.get("step"),
        "validation": val or None,
        "last_step": max(steps, default=None),
    }


def _label(key: str) -> str:
    """A field name as words; a file name (bm25/term_offsets.npy) stays as it is on disk."""
    return key.replace("_", " ") if key.isidentifier() else key


def files_summary(items: list[Any]) -> str:
    """A list of files (paths, or {"path", "bytes"} records) as a count, size and folder."""
    paths = [str(i.get("path", "")) if isinstance(i, dict) else str(i) for i in items]
    size = sum(int(i.get("bytes", 0)) for i in items if isinstance(i, dict))
    text = f"{len(paths):,} file{'s' if len(paths) != 1 else ''}"
    if size:
        text += f", {size / 1e6:,.1f} MB"
    try:
        folder = os.path.commonpath([os.path.dirname(p) for p in paths]) if paths else ""
    except ValueError:  # absolute and relative paths mixed
        folder = ""
    if len(paths) == 1:
        return f"{text}: {paths[0]}"
    return f"{text} in {folder}/" if folder else text


def brief(value: Any) -> str:
    """One short line for any JSON value: numbers grouped, dicts inline, long lists counted."""
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "none"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        # records by name (an index's files: path -> bytes, sha256): counted, as lists are
        return files_summary([{"path": k, **v} for k, v in value.items()])
    if isinstance(value, dict):
        return ", ".join(f"{_label(k)} {brief(v)}" for k, v in value.items()
                         if v not in (None, {}, [])) or "none"
    if isinstance(value, list):
        if value and all(isinstance(v, str | dict) for v in value) and (
                len(value) > 3 or isinstance(value[0], dict)):
            return files_summary(value)
        return ", ".join(brief(v) for v in value) if len(value) <= 3 else f"{len(value):,} items"
    return str(value)


def model_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary of a model: what it is, how well it validated, what it was trained on."""
    config = data["config"]
    encoder = dict(config.get("encoder") or {})
    vocab = encoder.pop("vocab_size", None)
    rows = [("model", data["path"])]
    val = data.get("validation")
    if val:
        rest = {k: val[k] for k in sorted(val, key=lambda k: "accuracy" not in k) if k != "step"}
        rows.append(("validation", f"{brief(rest)} (at step {brief(val.get('step'))})"))
    rows.append(("architecture", brief(encoder)))
    if vocab is not None:
        rows.append(("vocabulary", f"{vocab:,} words"))
    if data.get("last_step") is not None:
        rows.append(("steps", brief(data["last_step"])))
    train = config.get("train") or {}
    data_keys = [k for k, v in train.items()  # file lists and their sentence counts
                 if isinstance(v, list) or (k.endswith("_sentences") and type(v) is int)]
    for key in data_keys:
        rows.append((f"training {_label(key)}", brief(train[key])))
    options = {k: v for k, v in train.items() if k not in data_keys}
    if options:
        rows.append(("training options", brief(options)))
    return rows


#: Index fields a reader looks for first, with the names they are shown under.
INDEX_FIRST = {"path": "index", "count": "sentences", "index_type": "index type", "dim": "dim",
               "model": "model", "corpus": "corpus", "split_sentences": "split sentences",
               "transform": "transform", "full_text": "full text", "bm25": "exact BM25 files",
               "stages": "stage seconds"}


def index_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary of an index: the main fields first, then every other one, one line each."""
    first = [(label, brief(data[k])) for k, label in INDEX_FIRST.items() if k in data]
    rest = [(_label(k), brief(v)) for k, v in data.items() if k not in INDEX_FIRST and k != "kind"]
    return first + rest


def info(
    path: Path = typer.Argument(..., help="A model folder or an index folder."),
    as_json: bool = typer.Option(False, "--json", help="Print every field as JSON."),
    plot: bool = typer.Option(False, "--plot", help="Draw a model's training curves (loss and "
                              "validation against step) to training_curves.png beside its "
                              "metrics.jsonl; needs matplotlib."),
    plot_to: Path | None = typer.Option(None, "--plot-to", help="Draw them to this PNG file "
                                        "instead (implies --plot; leaves the folder untouched)."),
) -> None:
    """Summarise a model (validation, architecture, vocabulary, training data and steps) or an
    index (size, type, model, corpus); --json prints everything, file lists included."""
    from qtsearch.encoders.files import is_model_folder
    from qtsearch.lifecycle.on_disk import index_info

    if path.is_file():
        raise ModelError(f"{path}: is a file, not a model folder or an index folder")
    if not path.exists():
        from qtsearch.lifecycle.on_disk import restore_if_missing

        restore_if_missing(path)  # an index whose writer was killed mid-swap comes back
    if (path / "manifest.json").is_file():  # an index folder
        data = index_info(path)
        rows = index_rows(data)
    elif is_model_folder(path) or (path / "config.json").is_file():
        data = model_info(path)
        rows = model_rows(data)
    else:
        raise ModelError(f"{path}: neither a model folder nor an index folder")
    if plot or plot_to:
        from qtsearch.training.plots import plot_folder

        if data["kind"] != "model":
            raise UsageError(f"{path}: an index has no training curves; --plot takes a model")
        data["training_curves"] = str(plot_folder(path, plot_to))
        rows.append(("training curves", data["training_curves"]))
    if as_json:
        print_json(data)
        return
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # long paths break, never end in …
    for label, text in rows:
        table.add_row(label, Text(text))  # paths and options are not Rich markup
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command()(info)
