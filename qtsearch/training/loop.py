"""The one training loop: every objective (QT, FastSent, SDAE, NLI, pairs, several at once) is a
`Task` trained by `Loop`.

A task owns its data, its loss and its head; the loop owns everything else: the optimiser
(Adam over the encoder and every head), the learning-rate schedule, which task trains at each
step, logging, progress, validation, checkpoints, `--resume`, Ctrl-C and several processes
(training/distributed.py). A task's k-th training batch is a fixed function of the seed and k,
the task of each step a fixed function of the seed and the step, and the checkpoint holds the
weights, the optimiser and the RNG, so a resumed run continues exactly: same data, same weights
as an uninterrupted run. A step of G > 1 batches (`--batches-per-step`, one per process by
default) averages their gradients; each batch's dropout is then drawn from (seed, task, batch),
so the step is the same whichever process computes which batch, and a resume on another number
of processes continues the same run.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from qtsearch.core.allocator import keep_freed_memory
from qtsearch.core.device import autocast_dtype, resolve_device
from qtsearch.core.errors import Interrupted, UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.folder import save_model
from qtsearch.encoders.nn.objective import BatchStats
from qtsearch.text.vocab import Vocab
from qtsearch.training.checkpoint import (
    CHECKPOINT,
    load_state,
    save_heads,
    save_state,
    saved_config,
)
from qtsearch.training.configs import RunConfig
from qtsearch.training.distributed import (
    World,
    broadcast_modules,
    join,
    reduce_step,
    release_others,
    wait_for_main,
)
from qtsearch.training.metrics_log import MetricsLog, Window
from qtsearch.training.schedule import lr_factor, task_schedule


class Task(Protocol):
    """One objective: its data order, loss, validation and head."""

    name: str  # the metrics' "task" column and the prefix of its validation figures
    metric: str  # what its validation accuracy measures
    baseline: str  # what its `chance` figure is
    steps_per_epoch: int  # training batches in one pass over its data
    sentences_per_batch: int  # for the sentences/s figure

    def heads(self) -> dict[str, nn.Module]:
        """Trained modules of its own besides the shared encoder (saved in heads.safetensors)."""
        ...

    def batch_loss(self, k: int) -> BatchStats:
        """The loss of its k-th training batch (0-based): a fixed function of the seed and k."""
        ...

    def validate(self) -> tuple[float, float, float]:
        """(loss, accuracy, chance) on its held-out data; called in eval mode, without grad."""
        ...


def figure_prefix(index: int, task: Task) -> str:
    """The prefix of a task's validation figures: none for the first task (what `info` and
    the model folder's summary read), its name for the others."""
    return "" if index == 0 else f"{task.name}_"


@dataclass
class Runtime:
    """Where a run computes: the device, the autocast precision and the processes."""

    device: torch.device
    amp: torch.dtype | None
    world: World = field(default_factory=World)

    @classmethod
    def of(cls, config: RunConfig) -> Runtime:
        """Joins torchrun's process group if there is one; a process other than the first
        returns only once the first has built the data (see distributed.wait_for_main)."""
        world = join(config.device)
        device = resolve_device(config.device)
        runtime = cls(device, autocast_dtype(device, config.precision), world)
        wait_for_main(world)
        return runtime

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp)


@dataclass
class RunResult:
    out: Path
    steps: int
    first: dict[str, float] | None  # validation at step 0 (None when resumed)
    last: dict[str, float]  # validation at the end
    seconds: float
    tasks: list[Task] = field(default_factory=list)  # the first one's figures are unprefixed

    def summary(self) -> str:
        """The closing lines: steps, time, folder, each task's validation before → after."""
        lines = [f"trained {self.steps:,} steps in {self.seconds:,.0f} s → {self.out}"]
        for i, task in enumerate(self.tasks):
            p = figure_prefix(i, task)
            start = f"{self.first[p + 'val_accuracy']:.3f} at step 0 → " if self.first else ""
            lines.append(f"{task.name} validation {task.metric} {start}"
                         f"{self.last[p + 'val_accuracy']:.3f} ({task.baseline} "
                         f"{self.last[p + 'chance']:.3f})")
        return "\n".join(lines)


@contextlib.contextmanager
def stop_signals() -> Iterator[threading.Event]:
    """Ctrl-C and SIGTERM (kill, a job scheduler's stop) both end training with a checkpoint,
    also when the process started with SIGINT ignored (as `cmd &` does in scripts). The signal
    sets the event; the loop stops after the step in progress, at the same step on every
    process."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def batch_seed(seed: int, task: int, k: int) -> int:
    """The torch seed of a task's batch k in a step of several batches (its dropout)."""
    return int(np.random.SeedSequence([seed, task, k]).generate_state(1)[0])


class Loop:
    """Trains `encoder` (what the model folder holds) and the tasks' heads on `tasks`."""

    def __init__(self, config: RunConfig, runtime: Runtime, display: Reporter, encoder: nn.Module,
                 vocab: Vocab, tasks: Sequence[Task], facts: dict[str, Any],
                 schedule: str = "round-robin"):
        self.cfg, self.rt, self.display = config, runtime, display
        self.out = Path(config.out)
        self.encoder, self.vocab, self.tasks, self.facts = encoder, vocab, list(tasks), facts
        self.schedule = schedule
        self.modules = {"encoder": encoder}
        for task in self.tasks:
            self.modules.update(task.heads())
        self.params = [p for m in self.modules.values() for p in m.parameters()
                       if p.requires_grad]
        self.optim = torch.optim.Adam(self.params, lr=config.lr)
        self.plan(config.batches_per_step or runtime.world.size)
        release_others(runtime.world)

    # ----- pieces -----------------------------------------------------------------------
    def plan(self, per_step: int) -> None:
        """Steps of `per_step` batches: the number of steps and each one's task."""
        world = self.rt.world
        if per_step % world.size:
            raise UsageError(f"{per_step} batches per step cannot be shared by {world.size} "
                             "processes: use a number of processes that divides "
                             "--batches-per-step")
        self.per_step = per_step
        per_epoch = [max(1, t.steps_per_epoch // per_step) for t in self.tasks]
        self.total_steps = self.cfg.max_steps or self.cfg.epochs * sum(per_epoch)
        self.order, self.position = task_schedule(self.total_steps, per_epoch, self.schedule,
                                                  self.cfg.seed)

    def resumed_plan(self) -> None:
        """A resume keeps the checkpoint's batches per step (older ones had 1), so it
        continues the same run on any number of processes that divides them."""
        saved = saved_config(self.out).get("batches_per_step") or 1
        asked = self.cfg.batches_per_step
        if asked not in (None, saved):
            raise UsageError(f"--resume: --batches-per-step differs from the checkpoint "
                             f"({saved} there, {asked} now)")
        self.plan(saved)

    def run_config(self) -> RunConfig:
        """The options as run: the batches per step taken, whoever chose them."""
        config = copy.copy(self.cfg)
        config.batches_per_step = self.per_step
        return config

    def record(self) -> dict[str, Any]:
        """What config.json keeps under "train": the options and the data facts."""
        return {**dataclasses.asdict(self.run_config()), **self.facts}

    def save(self, step: int) -> None:
        """Checkpoint, then refresh the model folder (what `load_encoder` reads); process 0
        alone writes."""
        if not self.rt.world.main:
            return
        save_state(self.out, self.modules, self.optim, step, self.run_config(), self.facts)
        save_model(self.out, self.encoder, self.vocab, self.record())
        heads = {k: m for k, m in self.modules.items() if k != "encoder"}
        if heads:
            save_heads(self.out, heads)

    def set_lr(self, step: int) -> float:
        """The learning rate of update number `step` (1-based), set on the optimiser."""
        cfg = self.cfg
        lr = cfg.lr * lr_factor(step, cfg.warmup_steps, cfg.lr_schedule, self.total_steps)
        for group in self.optim.param_groups:
            group["lr"] = lr
        return lr

    def train_step(self, t: int, position: int, stop: bool) -> tuple[list[float], bool]:
        """One update on task `t`: this process's share of the step's batches, the gradients
        averaged over all of them, clipped and applied. Returns the step's (loss sum, correct,
        rows) over every process, and whether any process was asked to stop."""
        task, n = self.tasks[t], self.per_step
        self.optim.zero_grad(set_to_none=True)
        figures = [0.0, 0.0, 0.0]
        for k in self.rt.world.share(position * n, n):
            if n > 1:
                torch.manual_seed(batch_seed(self.cfg.seed, t, k))
            st = task.batch_loss(k)
            (st.loss / n).backward()
            figures = [figures[0] + float(st.loss.detach()), figures[1] + st.correct,
                       figures[2] + st.rows]
        *figures, stops = reduce_step(self.params, self.rt.world, [*figures, float(stop)])
        nn.utils.clip_grad_norm_(self.params, self.cfg.clip_norm)
        self.optim.step()
        return figures, stops > 0

    def validate(self) -> dict[str, float]:
        """Every task's held-out figures; the first task's unprefixed."""
        for m in self.modules.values():
            m.eval()
        row: dict[str, float] = {}
        with torch.no_grad():
            for i, task in enumerate(self.tasks):
                p = figure_prefix(i, task)
                loss, accuracy, chance = task.validate()
                row |= {f"{p}val_loss": loss, f"{p}val_accuracy": accuracy, f"{p}chance": chance}
        for m in self.modules.values():
            m.train()
        return row

    def describe(self, step: int, val: dict[str, float]) -> str:
        parts = []
        for i, task in enumerate(self.tasks):
            p = figure_prefix(i, task)
            parts.append(f"{task.name} {task.metric} {val[p + 'val_accuracy']:.4f} "
                         f"({task.baseline} {val[p + 'chance']:.4f}) loss "
                         f"{val[p + 'val_loss']:.4f}")
        return f"step {step:,} validation: " + "; ".join(parts)

    def start(self, resume: bool) -> int:
        """The step to start from (a resume: the checkpoint's), every process on the same
        weights; says how the steps are shared out."""
        step = 0
        if resume:
            self.resumed_plan()
            step = load_state(self.out, self.modules, self.optim, self.rt.device, self.cfg,
                              self.facts)
        elif self.rt.world.main:
            shutil.rmtree(self.out / CHECKPOINT, ignore_errors=True)
        broadcast_modules(self.modules, self.rt.world)
        if self.per_step > 1:
            self.display.note(f"{self.per_step} batches per step on {self.rt.world.size} "
                              "process(es)")
        if len(self.tasks) > 1:
            counts = np.bincount(self.order, minlength=len(self.tasks))
            self.display.note(", ".join(f"{n:,} {t.name} steps"
                                        for t, n in zip(self.tasks, counts))
                              + f" ({self.schedule})")
        return step

    # ----- the loop ---------------------------------------------------------------------
    def run(self, resume: bool = False) -> RunResult:
        cfg, main = self.cfg, self.rt.world.main
        keep_freed_memory()
        step = self.start(resume)
        log_row = MetricsLog(self.out, step, self.display.note) if main else (lambda row: None)
        first = last = None
        if step == 0:
            first = last = self.validate()
            log_row({"step": 0, **first})
            self.display.note(self.describe(0, first))
        t0, sentences = time.time(), 0
        windows: dict[int, Window] = {}
        done: dict[int, int] = {}  # batches each task has trained on
        with self.display.stage("training", self.total_steps, completed=step) as bar, \
                stop_signals() as stop:
            while step < self.total_steps:
                lr = self.set_lr(step + 1)
                t = int(self.order[step])
                (loss, correct, rows), stopping = self.train_step(
                    t, int(self.position[step]), stop.is_set())
                done[t] = (int(self.position[step]) + 1) * self.per_step
                step += 1
                sentences += self.tasks[t].sentences_per_batch * self.per_step
                windows.setdefault(t, Window()).add(loss, int(correct), int(rows),
                                                    self.per_step)
                if step % cfg.log_every == 0 or step == self.total_steps:
                    rate = sentences / max(time.time() - t0, 1e-9)
                    for t, window in sorted(windows.items()):
                        task, fig = self.tasks[t], window.figures()
                        log_row({"step": step, "task": task.name,
                                 "epoch": done[t] / task.steps_per_epoch, **fig, "lr": lr,
                                 "sentences_per_s": rate})
                        info = (f"{task.name} loss {fig['loss']:.3f} acc "
                                f"{fig['train_accuracy']:.3f} {rate:,.0f} sent/s")
                        bar.update(step, info)
                        self.display.status(f"step {step:,}/{self.total_steps:,} {info}")
                    windows.clear()
                if stopping and step < self.total_steps:
                    self.save(step)
                    raise Interrupted(f"interrupted at step {step}; checkpoint saved in "
                                      f"{self.out}; continue with --resume")
                if step % cfg.val_every == 0 or step == self.total_steps:
                    last = self.validate()
                    log_row({"step": step, **last})
                    self.display.note(self.describe(step, last))
                if step % cfg.checkpoint_every == 0 or step == self.total_steps:
                    self.save(step)
                bar.update(step)
        if last is None:
            last = self.validate()
        return RunResult(self.out, step, first, last, time.time() - t0, self.tasks)
