"""The one training loop: every objective (QT, FastSent, SDAE, NLI, pairs, several at once) is a
`Task` trained by `Loop`.

A task owns its data, its loss and its head; the loop owns everything else: the optimiser
(Adam over the encoder and every head), the learning-rate schedule, which task trains at each
step, logging, progress, validation, checkpoints, `--resume` and Ctrl-C. A task's k-th training
batch is a fixed function of the seed and k, the task of each step a fixed function of the seed
and the step, and the checkpoint holds the weights, the optimiser and the RNG, so a resumed run
continues exactly: same data, same weights as an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from qtsearch.device import autocast_dtype, resolve_device
from qtsearch.errors import Interrupted, UsageError
from qtsearch.models.folder import save_model
from qtsearch.models.objective import BatchStats
from qtsearch.text.vocab import Vocab
from qtsearch.training.checkpoint import CHECKPOINT, load_state, save_heads, save_state
from qtsearch.training.metrics import MetricsLog, Window
from qtsearch.training.progress import Display

SCHEDULES = ("constant", "inverse-sqrt", "linear")
TASK_SCHEDULES = ("proportional", "round-robin")


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

    #: Fields a resumed run may change: where it stops, where it runs, what it reports.
    RESUMABLE: ClassVar[frozenset[str]] = frozenset({
        "out", "epochs", "max_steps", "device", "precision", "val_every", "checkpoint_every",
        "log_every"})

    def __post_init__(self) -> None:
        if self.warmup_steps is None:
            self.warmup_steps = 0
        if self.lr_schedule is None:
            self.lr_schedule = "constant"

    def check_run(self, at_least_one: Sequence[str] = ()) -> None:
        """The checks every config shares (one UsageError line each), plus counts of at
        least 1 among `at_least_one`."""
        for name in ("epochs", "val_every", "checkpoint_every", "log_every", *at_least_one):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise UsageError("--max-steps must be at least 1")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UsageError("--lr must be a positive number")
        if self.lr_schedule not in SCHEDULES:
            raise UsageError(f"--lr-schedule must be one of {', '.join(SCHEDULES)}")
        if self.warmup_steps < 0:
            raise UsageError("--warmup-steps must be 0 or more")


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
    """Where a run computes: the device and the autocast precision."""

    device: torch.device
    amp: torch.dtype | None

    @classmethod
    def of(cls, config: RunConfig) -> Runtime:
        device = resolve_device(config.device)
        return cls(device, autocast_dtype(device, config.precision))

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
def stop_signals() -> Iterator[None]:
    """Ctrl-C and SIGTERM (kill, a job scheduler's stop) both end training with a checkpoint,
    also when the process started with SIGINT ignored (as `cmd &` does in scripts)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Loop:
    """Trains `encoder` (what the model folder holds) and the tasks' heads on `tasks`."""

    def __init__(self, config: RunConfig, runtime: Runtime, display: Display, encoder: nn.Module,
                 vocab: Vocab, tasks: Sequence[Task], facts: dict[str, Any],
                 schedule: str = "round-robin"):
        self.cfg, self.rt, self.display = config, runtime, display
        self.out = Path(config.out)
        self.encoder, self.vocab, self.tasks, self.facts = encoder, vocab, list(tasks), facts
        per_epoch = [t.steps_per_epoch for t in self.tasks]
        self.total_steps = config.max_steps or config.epochs * sum(per_epoch)
        self.order, self.position = task_schedule(self.total_steps, per_epoch, schedule,
                                                  config.seed)
        self.modules = {"encoder": encoder}
        for task in self.tasks:
            self.modules.update(task.heads())
        self.params = [p for m in self.modules.values() for p in m.parameters()
                       if p.requires_grad]
        self.optim = torch.optim.Adam(self.params, lr=config.lr)
        if len(self.tasks) > 1:
            counts = np.bincount(self.order, minlength=len(self.tasks))
            display.note(", ".join(f"{n:,} {t.name} steps" for t, n in zip(self.tasks, counts))
                         + f" ({schedule})")

    # ----- pieces -----------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        """What config.json keeps under "train": the options and the data facts."""
        return {**dataclasses.asdict(self.cfg), **self.facts}

    def save(self, step: int) -> None:
        """Checkpoint, then refresh the model folder (what `load_encoder` reads)."""
        save_state(self.out, self.modules, self.optim, step, self.cfg, self.facts)
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

    # ----- the loop ---------------------------------------------------------------------
    def run(self, resume: bool = False) -> RunResult:
        cfg = self.cfg
        step = 0
        if resume:
            step = load_state(self.out, self.modules, self.optim, self.rt.device, cfg,
                              self.facts)
        else:
            shutil.rmtree(self.out / CHECKPOINT, ignore_errors=True)
        log_row = MetricsLog(self.out, step)
        first = last = None
        if step == 0:
            first = last = self.validate()
            log_row({"step": 0, **first})
            self.display.note(self.describe(0, first))
        t0, sentences = time.time(), 0
        windows: dict[int, Window] = {}
        done: dict[int, int] = {}  # batches each task has trained on
        with self.display.bar("training", self.total_steps, step) as update, stop_signals():
            try:
                while step < self.total_steps:
                    lr = self.set_lr(step + 1)
                    t = int(self.order[step])
                    st = self.tasks[t].batch_loss(int(self.position[step]))
                    self.optim.zero_grad(set_to_none=True)
                    st.loss.backward()
                    nn.utils.clip_grad_norm_(self.params, cfg.clip_norm)
                    self.optim.step()
                    done[t] = int(self.position[step]) + 1
                    step += 1
                    sentences += self.tasks[t].sentences_per_batch
                    windows.setdefault(t, Window()).add(float(st.loss.detach()), st.correct,
                                                        st.rows)
                    if step % cfg.log_every == 0 or step == self.total_steps:
                        rate = sentences / max(time.time() - t0, 1e-9)
                        for t, window in sorted(windows.items()):
                            task, fig = self.tasks[t], window.figures()
                            log_row({"step": step, "task": task.name,
                                     "epoch": done[t] / task.steps_per_epoch, **fig, "lr": lr,
                                     "sentences_per_s": rate})
                            info = (f"{task.name} loss {fig['loss']:.3f} acc "
                                    f"{fig['train_accuracy']:.3f} {rate:,.0f} sent/s")
                            update(step, info)
                            self.display.status(f"step {step:,}/{self.total_steps:,} {info}")
                        windows.clear()
                    if step % cfg.val_every == 0 or step == self.total_steps:
                        last = self.validate()
                        log_row({"step": step, **last})
                        self.display.note(self.describe(step, last))
                    if step % cfg.checkpoint_every == 0 or step == self.total_steps:
                        self.save(step)
                    update(step, None)
            except KeyboardInterrupt:
                self.save(step)
                raise Interrupted(f"interrupted at step {step}; checkpoint saved in {self.out}; "
                                  "continue with --resume") from None
        if last is None:
            last = self.validate()
        return RunResult(self.out, step, first, last, time.time() - t0, self.tasks)
