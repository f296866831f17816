"""Training curves as a picture: each task's loss and validation metric against step.

A run's metrics.jsonl (training/metrics_log.py) has one row per task and log interval and one per
validation, the first task's validation figures unprefixed and the others' prefixed with their
name. The picture has one row of two panels per task: loss (training and validation) and the
validation metric with its chance level, so a glance says whether each task learns and how far
above chance it is. matplotlib is an optional extra (`pip install 'qtsearch[plot]'`), imported
only here and only when a picture is drawn; the Agg canvas needs no display.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtsearch.core.errors import ModelError, OutputError, UsageError
from qtsearch.encoders.files import METRICS, read_config, read_metrics

#: The picture's name beside metrics.jsonl.
CURVES = "training_curves.png"
#: The one line shown where matplotlib is missing.
MISSING = "no training curves without matplotlib (pip install matplotlib)"


@dataclass
class Curves:
    """One task's series, each a list of (step, value)."""

    name: str
    loss: list[tuple[int, float]] = field(default_factory=list)
    val_loss: list[tuple[int, float]] = field(default_factory=list)
    val_metric: list[tuple[int, float]] = field(default_factory=list)
    chance: list[tuple[int, float]] = field(default_factory=list)


def task_curves(rows: Iterable[dict[str, Any]], first: str = "training") -> list[Curves]:
    """The series of every task in a metrics log, the first task (unprefixed validation
    figures) first. `first` names it when the log does not (logs from before the task column)."""
    rows = [r for r in rows if isinstance(r.get("step"), int)]
    trained = list(dict.fromkeys(str(r.get("task", first)) for r in rows if "loss" in r))
    prefixed = list(dict.fromkeys(k[: -len("_val_loss")] for r in rows for k in r
                                  if k.endswith("_val_loss")))
    unprefixed = [t for t in trained if t not in prefixed]
    curves = {"": Curves(unprefixed[0] if unprefixed else first)}
    curves |= {f"{p}_": Curves(p) for p in prefixed}
    by_name = {c.name: c for c in curves.values()}
    for r in rows:
        step = r["step"]
        if "loss" in r:
            name = str(r.get("task", first))
            by_name.setdefault(name, Curves(name)).loss.append((step, float(r["loss"])))
        for p, c in curves.items():
            if f"{p}val_loss" in r:
                c.val_loss.append((step, float(r[f"{p}val_loss"])))
            if f"{p}val_accuracy" in r:
                c.val_metric.append((step, float(r[f"{p}val_accuracy"])))
            if f"{p}chance" in r:
                c.chance.append((step, float(r[f"{p}chance"])))
    return [c for c in by_name.values() if c.loss or c.val_loss or c.val_metric]


def _matplotlib() -> Any:
    """The Figure class, or UsageError with the line that says how to get it."""
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise UsageError(MISSING) from e
    return Figure


def draw_curves(rows: Iterable[dict[str, Any]], path: Path, title: str = "",
                first: str = "training") -> Path:
    """Draws the curves of a metrics log to the PNG `path` (replaced atomically: a viewer
    never opens half a file while training redraws it)."""
    curves = task_curves(rows, first)
    if not curves:
        raise UsageError(f"{title or path}: no training figures to plot yet")
    figure = _matplotlib()(figsize=(10, 0.6 + 2.6 * len(curves)), layout="constrained")
    axes = figure.subplots(len(curves), 2, squeeze=False)
    for (left, right), c in zip(axes, curves):
        if c.loss:
            left.plot(*zip(*c.loss), lw=1, alpha=0.8, label="training")
        if c.val_loss:
            left.plot(*zip(*c.val_loss), "o-", ms=3, label="validation")
        left.set_ylabel(f"{c.name} loss")
        left.legend(loc="upper right", fontsize="small")
        if c.val_metric:
            right.plot(*zip(*c.val_metric), "o-", ms=3, color="C1", label="validation")
        if c.chance:
            right.plot(*zip(*c.chance), ":", color="grey", label="chance")
        right.set_ylabel(f"{c.name} val accuracy")
        right.legend(loc="lower right", fontsize="small")
        for ax in (left, right):
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("step")
    if title:
        figure.suptitle(title, fontsize="medium")
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        figure.savefig(tmp, format="png", dpi=80)
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"{path}: cannot write the picture ({e.strerror or e})") from e
    return path


def plot_folder(folder: Path, path: Path | None = None) -> Path:
    """The curves of a model folder's metrics.jsonl, written to `path` (default: beside it)."""
    folder = Path(folder)
    rows = read_metrics(folder)
    if not rows:
        raise UsageError(f"{folder}: no {METRICS} to plot")
    try:  # the first task's name when the log lacks it; no config before the first save
        objective = str(read_config(folder).get("encoder", {}).get("objective", "training"))
    except ModelError:
        objective = "training"
    return draw_curves(rows, path or folder / CURVES, title=str(folder), first=objective)
