"""The metrics log of a model folder (metrics.jsonl) and the training figures it averages.

One JSON line per task and log interval (step, task, epoch, loss, train_accuracy, batches, lr,
sentences_per_s) and one per validation (step, val_loss, val_accuracy, chance, and the other
tasks' figures prefixed with their name).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qtsearch.core.errors import UsageError
from qtsearch.encoders.files import METRICS
from qtsearch.training.plots import plot_folder


class MetricsLog:
    """Appends rows; a fresh run starts the file again, a resumed one drops the lines written
    after its checkpoint, so the log reads as one uninterrupted run."""

    def __init__(self, folder: Path, step: int, note: Callable[[str], None] | None = None):
        self.path = folder / METRICS
        self.note = note  # says once that the curves are not drawn (no matplotlib)
        if step == 0:
            self.path.unlink(missing_ok=True)
        elif self.path.is_file():
            keep = [ln for ln in self.path.read_text(encoding="utf-8").splitlines()
                    if ln.strip() and json.loads(ln).get("step", 0) <= step]
            self.path.write_text("".join(ln + "\n" for ln in keep), encoding="utf-8")

    def __call__(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        if "val_loss" in row:  # each validation redraws the curves beside the log
            try:
                plot_folder(self.path.parent)
            except UsageError as e:
                if self.note:
                    self.note(f"qtsearch: {e}")
                self.note = None


@dataclass
class Window:
    """One task's training batches since the last log line."""

    loss: float = 0.0
    correct: int = 0
    rows: int = 0
    batches: int = 0

    def add(self, loss: float, correct: int, rows: int, batches: int = 1) -> None:
        """`loss`: the sum over the `batches` batches of one step."""
        self.loss += loss
        self.correct += correct
        self.rows += rows
        self.batches += batches

    def figures(self) -> dict[str, float]:
        return {"loss": self.loss / self.batches,
                "train_accuracy": self.correct / max(1, self.rows),
                "batches": self.batches}
