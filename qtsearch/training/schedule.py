"""What the loop does at each step: the learning rate and, with several tasks, which task."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def lr_factor(step: int, warmup: int, schedule: str, total: int) -> float:
    """Multiplier of --lr for update number `step` (1-based): a linear warm-up over `warmup`
    updates, then constant, ∝ 1/√step (1 at the end of the warm-up), or linear down to the
    last update (`total`)."""
    if step <= warmup:
        return step / warmup
    if schedule == "inverse-sqrt":
        return math.sqrt(max(warmup, 1) / step)
    if schedule == "linear":
        return max(0.0, (total - step + 1) / max(total - warmup, 1))
    return 1.0


def task_schedule(n_steps: int, batches_per_epoch: Sequence[int], kind: str,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(task index of each step, position of the step within its task). `round-robin` takes
    the tasks in turn; `proportional` draws each step's task with probability proportional to
    its batches per epoch, so all tasks pass over their data at the same rate."""
    n_tasks = len(batches_per_epoch)
    if kind == "round-robin" or n_tasks == 1:
        tasks = np.arange(n_steps) % n_tasks
    else:
        share = np.asarray(batches_per_epoch, dtype=np.float64) / sum(batches_per_epoch)
        draws = np.random.default_rng([seed, 1]).random(n_steps)
        tasks = np.minimum(np.searchsorted(np.cumsum(share), draws, side="right"), n_tasks - 1)
    position = np.zeros(n_steps, dtype=np.int64)
    for t in range(n_tasks):
        mask = tasks == t
        position[mask] = np.arange(int(mask.sum()))
    return tasks.astype(np.int64), position
