"""The options every training run has (`RunConfig`) and the schedules they name."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from qtsearch.core.errors import UsageError

#: --lr-schedule: what follows the warm-up (training/schedule.lr_factor computes them).
SCHEDULES = ("constant", "inverse-sqrt", "linear")
#: --schedule of train-multitask: how each step's task is chosen (schedule.task_schedule).
TASK_SCHEDULES = ("proportional", "round-robin")


@dataclass
class RunConfig:
    """The options every run has; each trainer's config adds its own. Saved in the checkpoint
    and in the model's config.json; a resume must match every field but the RESUMABLE ones."""

    out: str = "model"
    lr: float = 5e-4
    clip_norm: float = 5.0
    epochs: int = 1
    max_steps: int | None = None
    warmup_steps: int | None = None  # None: the trainer's default
    lr_schedule: str | None = None
    device: str = "auto"
    precision: str = "auto"
    seed: int = 0
    val_every: int = 500
    checkpoint_every: int = 1000
    log_every: int = 20
    batches_per_step: int | None = None  # None: one per process (a resume: the checkpoint's)

    #: Fields a resumed run may change: where it stops, where it runs, what it reports.
    #: (`batches_per_step` is checked by the loop: None takes the checkpoint's.)
    RESUMABLE: ClassVar[frozenset[str]] = frozenset({
        "out", "epochs", "max_steps", "device", "precision", "val_every", "checkpoint_every",
        "log_every", "batches_per_step"})

    def __post_init__(self) -> None:
        if self.warmup_steps is None:
            self.warmup_steps = 0
        if self.lr_schedule is None:
            self.lr_schedule = SCHEDULES[0]

    def check_run(self, at_least_one: Sequence[str] = ()) -> None:
        """The checks every config shares (one UsageError line each), plus counts of at
        least 1 among `at_least_one`."""
        for name in ("epochs", "val_every", "checkpoint_every", "log_every", *at_least_one):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("max_steps", "batches_per_step"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UsageError("--lr must be a positive number")
        if self.lr_schedule not in SCHEDULES:
            raise UsageError(f"--lr-schedule must be one of {', '.join(SCHEDULES)}")
        if self.warmup_steps < 0:
            raise UsageError("--warmup-steps must be 0 or more")
