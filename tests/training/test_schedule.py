"""qtsearch.training.schedule: the learning rate of each update and, with several tasks, each
step's task, deterministic for a seed and proportional to each task's batches."""

from __future__ import annotations

import numpy as np
import pytest

from qtsearch.training.schedule import lr_factor, task_schedule


def test_warmup_is_linear_then_constant() -> None:
    assert [lr_factor(s, 4, "constant", 100) for s in (1, 2, 4, 5, 100)] == [
        0.25, 0.5, 1.0, 1.0, 1.0]


def test_inverse_sqrt_is_one_at_the_end_of_the_warmup() -> None:
    assert lr_factor(4, 4, "inverse-sqrt", 100) == 1.0
    assert lr_factor(16, 4, "inverse-sqrt", 100) == pytest.approx(0.5)
    assert lr_factor(400, 4, "inverse-sqrt", 1000) == pytest.approx(0.1)
    assert lr_factor(9, 0, "inverse-sqrt", 100) == pytest.approx(1 / 3)  # no warm-up: 1/√step


def test_linear_falls_to_the_last_update() -> None:
    assert lr_factor(11, 10, "linear", 20) == pytest.approx(1.0)
    assert lr_factor(15, 10, "linear", 20) == pytest.approx(0.6)
    assert lr_factor(20, 10, "linear", 20) == pytest.approx(0.1)
    assert lr_factor(25, 10, "linear", 20) == 0.0  # past the end: never negative


def test_round_robin_takes_the_tasks_in_turn() -> None:
    tasks, position = task_schedule(7, [100, 5, 1], "round-robin", seed=0)
    assert tasks.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert position.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert tasks.dtype == np.int64 and position.dtype == np.int64


def test_one_task_is_every_step() -> None:
    tasks, position = task_schedule(5, [3], "proportional", seed=1)
    assert tasks.tolist() == [0] * 5 and position.tolist() == [0, 1, 2, 3, 4]


def test_proportional_is_deterministic_for_a_seed() -> None:
    a = task_schedule(500, [30, 10], "proportional", seed=7)
    b = task_schedule(500, [30, 10], "proportional", seed=7)
    c = task_schedule(500, [30, 10], "proportional", seed=8)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_proportional_shares_follow_the_batches_per_epoch() -> None:
    batches = [600, 300, 100]
    tasks, position = task_schedule(20_000, batches, "proportional", seed=0)
    share = np.bincount(tasks, minlength=3) / len(tasks)
    assert share == pytest.approx([0.6, 0.3, 0.1], abs=0.015)
    # each task's steps are numbered 0, 1, 2, ... in order
    for t in range(3):
        assert position[tasks == t].tolist() == list(range(int((tasks == t).sum())))
    # a task with no batches is never drawn
    none, _ = task_schedule(2_000, [5, 0, 5], "proportional", seed=3)
    assert set(none.tolist()) == {0, 2}
