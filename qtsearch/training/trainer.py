"""Training loop for Quick-Thoughts encoders, and for FastSent and the SDAE on the same batches.

The corpus is tokenised once into a `TokenCorpus`; it is cut into blocks of B contiguous
sentences (sentences are never shuffled, blocks are); a few evenly spaced blocks are held out
for validation. The block order of epoch e is a permutation drawn from (seed, e), so the step
number alone fixes the data position and `--resume` continues exactly: same data, same
optimiser state, same weights as an uninterrupted run (the SDAE's noise is drawn from
(seed, step) too).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from qtsearch.config import write_json_atomic
from qtsearch.device import autocast_dtype, resolve_device
from qtsearch.encode.pretrained import glove_matrix
from qtsearch.errors import InputError, Interrupted, ModelError, OutputError, UsageError
from qtsearch.models.encoders import ENCODERS, EncoderConfig
from qtsearch.models.folder import METRICS, build_model, save_model
from qtsearch.models.objective import BatchStats, ObjectiveOptions, pooled
from qtsearch.text.reader import list_files
from qtsearch.text.token_corpus import TokenCorpus

log = logging.getLogger("qtsearch")


@contextlib.contextmanager
def _stop_signals_save_checkpoint() -> Iterator[None]:
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


# the encoders each objective can train, the first being its default
OBJECTIVE_ENCODERS = {
    "qt": ("uni", *(e for e in ENCODERS if e != "uni")),
    "fastsent": ("bow",),  # FastSent is a bag of words by definition
    "sdae": ("uni", "bi"),
}
SCHEDULES = ("constant", "inverse-sqrt", "linear")
TRANSFORMER_DEFAULTS = {"hidden": 512, "warmup_steps": 1000, "lr_schedule": "inverse-sqrt"}
GRU_DEFAULTS = {"hidden": 1000, "warmup_steps": 0, "lr_schedule": "constant"}


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


def check_run_options(config: Any, at_least_one: Sequence[str]) -> None:
    """The checks every trainer's config shares: counts of at least 1, an optional positive
    --max-steps and a positive finite --lr (one UsageError line each)."""
    for name in at_least_one:
        if getattr(config, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    if config.max_steps is not None and config.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if not (config.lr > 0 and math.isfinite(config.lr)):
        raise UsageError("--lr must be a positive number")


@dataclass
class TrainConfig:
    """Everything that defines a training run; saved in the model's config.json.

    None (encoder, hidden, warm-up, schedule) means the default of the objective and encoder:
    see OBJECTIVE_ENCODERS, TRANSFORMER_DEFAULTS and GRU_DEFAULTS.
    """

    corpus: list[str] = field(default_factory=list)
    out: str = "model"
    objective: str = "qt"
    encoder: str | None = None
    hidden: int | None = None
    word_dim: int = 300
    vocab_size: int = 50_000
    max_len: int = 50
    context: int = 3
    batch_size: int = 400
    lr: float = 5e-4
    clip_norm: float = 5.0
    epochs: int = 1
    max_steps: int | None = None
    device: str = "auto"
    precision: str = "auto"
    split_sentences: bool = False
    seed: int = 0
    val_every: int = 500
    val_blocks: int = 50
    checkpoint_every: int = 1000
    log_every: int = 20
    layers: int = 4  # transformer
    heads: int = 8  # transformer
    warmup_steps: int | None = None
    lr_schedule: str | None = None
    fastsent_ae: bool = False
    word_dropout: float = 0.1  # SDAE p0
    swap_prob: float = 0.1  # SDAE px

    def __post_init__(self) -> None:
        if self.encoder is None and self.objective in OBJECTIVE_ENCODERS:
            self.encoder = OBJECTIVE_ENCODERS[self.objective][0]
        defaults = TRANSFORMER_DEFAULTS if self.encoder == "transformer" else GRU_DEFAULTS
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)

    def check(self) -> None:
        if self.objective not in OBJECTIVE_ENCODERS:
            raise UsageError(
                f"--objective must be one of {', '.join(OBJECTIVE_ENCODERS)}, "
                f"not {self.objective!r}"
            )
        allowed = OBJECTIVE_ENCODERS[self.objective]
        if self.encoder not in allowed:
            raise UsageError(
                f"--encoder for --objective {self.objective} must be one of "
                f"{', '.join(allowed)}, not {self.encoder!r}"
            )
        if self.lr_schedule not in SCHEDULES:
            raise UsageError(f"--lr-schedule must be one of {', '.join(SCHEDULES)}")
        for name in ("word_dropout", "swap_prob"):
            if not 0 <= getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be in [0, 1)")
        if self.warmup_steps < 0:
            raise UsageError("--warmup-steps must be 0 or more")
        if self.context < 3 or self.context % 2 == 0:
            raise UsageError("--context must be an odd number ≥ 3 (3 = previous and next sentence)")
        check_run_options(self, ("hidden", "word_dim", "vocab_size", "max_len", "batch_size",
                                 "epochs", "val_every", "val_blocks", "checkpoint_every",
                                 "log_every", "layers", "heads"))
        if self.batch_size < self.context:
            raise UsageError("--batch-size must be larger than --context")
        if self.encoder == "transformer" and self.hidden % self.heads:
            raise UsageError("--heads must divide --hidden (the transformer's d_model)")

    def encoder_config(self, vocab_len: int) -> EncoderConfig:
        return EncoderConfig(
            encoder=self.encoder,
            vocab_size=vocab_len,
            word_dim=self.word_dim,
            hidden=self.hidden,
            max_len=self.max_len,
            objective=self.objective,
            layers=self.layers,
            heads=self.heads,
        )

    def objective_options(self) -> ObjectiveOptions:
        return ObjectiveOptions(
            context=self.context,
            autoencode=self.fastsent_ae,
            word_dropout=self.word_dropout,
            swap_prob=self.swap_prob,
        )


@dataclass
class TrainResult:
    out: Path
    steps: int
    val_accuracy: float
    chance: float
    seconds: float
    metric: str = "context accuracy"  # what val_accuracy measures
    baseline: str = "chance"  # what `chance` is


class Trainer:
    def __init__(self, config: TrainConfig, progress: bool = True, console: Console | None = None):
        config.check()
        self.cfg = config
        self.out = Path(config.out)
        self.show = progress
        self.console = console or Console(stderr=True)
        self.device = resolve_device(config.device)
        self.amp = autocast_dtype(self.device, config.precision)

    # ----- data -------------------------------------------------------------------------
    def prepare(self) -> None:
        cfg = self.cfg
        if not cfg.corpus:
            raise UsageError("give at least one corpus file or folder")
        list_files(cfg.corpus)  # missing paths fail before anything is written
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            probe = self.out / ".write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as e:
            raise OutputError(f"{self.out}: cannot write the model folder ({e.strerror})") from e
        with self._bars() as prog:
            task = prog.add_task("tokenising", total=None, info="")
            self.data = TokenCorpus.build(
                cfg.corpus,
                self.out / "cache" / "corpus",
                cfg.split_sentences,
                cfg.vocab_size,
                cfg.max_len,
                progress=lambda n: prog.update(task, completed=n, info=f"{n:,} sentences"),
            )
            n, b = len(self.data), cfg.batch_size
            n_blocks = n // b
            if n_blocks < 2:  # inside the bars: they are cleared, the message stays alone
                raise InputError(
                    f"the corpus has {n:,} sentences; training needs at least 2 × batch size "
                    f"({2 * b:,}): one batch to train on and one to validate. Use a larger "
                    "corpus or a smaller --batch-size"
                )
        n_val = min(cfg.val_blocks, max(1, n_blocks // 20))
        self.val_blocks = np.unique(
            np.linspace(0, n_blocks - 1, n_val + 2)[1:-1].round().astype(int)
        )
        self.train_blocks = np.setdiff1d(np.arange(n_blocks), self.val_blocks)
        self.steps_per_epoch = len(self.train_blocks)
        self.total_steps = cfg.max_steps or cfg.epochs * self.steps_per_epoch

    def block_at(self, step: int) -> int:
        """The block trained on at `step` (0-based): a fixed function of seed and step."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(self.train_blocks)
        return int(order[pos])

    def _batch(self, block: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b = self.cfg.batch_size
        ids, lengths, docs = self.data.batch(block * b, (block + 1) * b)
        return ids.to(self.device), lengths.to(self.device), docs.to(self.device)

    # ----- model ------------------------------------------------------------------------
    def build_model(self) -> None:
        torch.manual_seed(self.cfg.seed)
        self.model = build_model(self.cfg.encoder_config(len(self.data.vocab)))
        self.objective_options = self.cfg.objective_options()
        if self.cfg.objective == "fastsent":
            self.model.set_word_frequencies(torch.from_numpy(self.train_word_counts()))
        if self.cfg.encoder == "mc":
            matrix, coverage = glove_matrix(self.data.vocab.words)
            self.model.set_frozen_vectors(torch.from_numpy(matrix))
            log.info("GloVe covers %.1f%% of the vocabulary", 100 * coverage)
        self.model.to(self.device)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optim = torch.optim.Adam(params, lr=self.cfg.lr)

    def stats(self, block: int, noise_seed: list[int]) -> BatchStats:
        """The objective on one block; `noise_seed` fixes any random noise (SDAE)."""
        ids, lengths, docs = self._batch(block)
        rng = np.random.default_rng(noise_seed)
        with self._autocast():
            return self.model.objective(ids, lengths, docs, self.objective_options, rng)

    def set_lr(self, step: int) -> float:
        """The learning rate of update number `step` (1-based), set on the optimiser."""
        cfg = self.cfg
        lr = cfg.lr * lr_factor(step, cfg.warmup_steps, cfg.lr_schedule, self.total_steps)
        for group in self.optim.param_groups:
            group["lr"] = lr
        return lr

    def train_word_counts(self) -> np.ndarray:
        """How often each vocabulary id occurs in the training blocks (validation left out)."""
        b = self.cfg.batch_size
        counts = np.zeros(len(self.data.vocab), dtype=np.int64)
        for block in self.train_blocks:
            lo, hi = self.data.offsets[block * b], self.data.offsets[(block + 1) * b]
            counts += np.bincount(self.data.ids[lo:hi], minlength=len(counts))
        return counts

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp)

    # ----- checkpoints ------------------------------------------------------------------
    def _train_record(self) -> dict[str, Any]:
        record = dataclasses.asdict(self.cfg)
        record["corpus_signature"] = self.data.meta["signature"]
        record["corpus_sentences"] = len(self.data)
        return record

    def save_checkpoint(self, step: int) -> None:
        ckpt = self.out / "checkpoint"
        tmp = self.out / "checkpoint.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        tensors = {
            f"model.{k}": v.detach().cpu().contiguous() for k, v in self.model.state_dict().items()
        }
        opt = self.optim.state_dict()
        for i, st in opt["state"].items():
            for k, v in st.items():
                tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().cpu().contiguous()
        tensors["rng.torch"] = torch.get_rng_state()
        save_file(tensors, str(tmp / "state.safetensors"))
        write_json_atomic(
            tmp / "state.json",
            {
                "step": step,
                "param_groups": opt["param_groups"],
                "signature": self.data.meta["signature"],
                "config": self._train_record(),
            },
        )
        shutil.rmtree(ckpt, ignore_errors=True)
        tmp.rename(ckpt)
        save_model(self.out, self.model, self.data.vocab, self._train_record())

    def load_checkpoint(self) -> int:
        ckpt = self.out / "checkpoint"
        tmp = self.out / "checkpoint.tmp"
        if not (ckpt / "state.json").is_file() and (tmp / "state.json").is_file():
            ckpt = tmp  # killed between removing the old checkpoint and renaming this one
        try:
            state = json.loads((ckpt / "state.json").read_text())
            tensors = load_file(str(ckpt / "state.safetensors"))  # safetensors: never pickle
            if not isinstance(state, dict) or not {"signature", "config", "step"} <= set(state):
                raise ValueError("state.json lacks signature, config or step")
        except FileNotFoundError as e:
            raise ModelError(f"{self.out}: no checkpoint to resume from (the run stopped "
                             "before its first one; run again without --resume)") from e
        except (OSError, ValueError, SafetensorError) as e:
            raise ModelError(f"{ckpt}: corrupt checkpoint ({e})") from e
        if state["signature"] != self.data.meta["signature"]:
            raise UsageError("--resume needs the same corpus and options as the interrupted run")
        old = state["config"]
        for key in (
            "objective", "encoder", "hidden", "word_dim", "context", "batch_size", "seed", "lr",
            "layers", "heads", "warmup_steps", "lr_schedule", "fastsent_ae", "word_dropout",
            "swap_prob",
        ):
            # a checkpoint older than an option was trained with the option's QT default
            before = old.get(key, getattr(TrainConfig(), key))
            if before != getattr(self.cfg, key):
                raise UsageError(
                    f"--resume: --{key.replace('_', '-')} differs from the checkpoint "
                    f"({before} there, {getattr(self.cfg, key)} now)"
                )
        try:
            self.model.load_state_dict(
                {k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        except RuntimeError as e:
            raise ModelError(f"{ckpt}: checkpoint does not match the model "
                             f"({str(e).splitlines()[0]})") from e
        opt_state: dict[int, dict[str, torch.Tensor]] = {}
        for k, v in tensors.items():
            if k.startswith("opt."):
                _, i, name = k.split(".", 2)
                opt_state.setdefault(int(i), {})[name] = v.to(self.device) if v.dim() else v
        self.optim.load_state_dict({"state": opt_state, "param_groups": state["param_groups"]})
        torch.set_rng_state(tensors["rng.torch"])
        step = int(state["step"])
        self._trim_metrics(step)
        return step

    def _trim_metrics(self, step: int) -> None:
        """Drop metric lines written after the checkpoint, so a resumed log has no repeats."""
        path = self.out / METRICS
        if path.is_file():
            keep = [
                ln
                for ln in path.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= step
            ]
            path.write_text("".join(ln + "\n" for ln in keep))

    def _log(self, row: dict[str, Any]) -> None:
        with open(self.out / METRICS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    # ----- loop -------------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        self.model.eval()
        with torch.no_grad():
            # the same noise at every validation, so the metric is comparable along the run
            loss, accuracy, chance = pooled(self.stats(int(block), [self.cfg.seed, int(block), 1])
                                            for block in self.val_blocks)
        self.model.train()
        return {"val_loss": loss, "val_accuracy": accuracy, "chance": chance}

    def _plain(self, line: str) -> None:
        """Plain progress lines for logs: a bar drawn to a file shows nothing until the end."""
        if self.show and not self.console.is_terminal:
            self.console.print(line, highlight=False)

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            disable=not self.show,
            transient=False,
        )

    @contextlib.contextmanager
    def _bars(self) -> Iterator[Progress]:
        """The progress bars, cleared on an error so that its message is the one line left."""
        with self._progress() as prog:
            try:
                yield prog
            except BaseException:
                for task in list(prog.task_ids):
                    prog.remove_task(task)
                raise

    def run(self, resume: bool = False) -> TrainResult:
        self.prepare()
        self.build_model()
        step = self.load_checkpoint() if resume else 0
        if not resume:
            shutil.rmtree(self.out / "checkpoint", ignore_errors=True)
            (self.out / METRICS).unlink(missing_ok=True)
        cfg = self.cfg
        t_start = time.time()
        seen = 0
        window: list[tuple[float, int, int]] = []
        last = self.validate() if step == 0 else None
        if last:
            self._log({"step": 0, **last})
        self.model.train()
        with self._bars() as prog, _stop_signals_save_checkpoint():
            task = prog.add_task("training", total=self.total_steps, completed=step, info="")
            try:
                while step < self.total_steps:
                    lr = self.set_lr(step + 1)
                    st = self.stats(self.block_at(step), [cfg.seed, step, 0])
                    self.optim.zero_grad(set_to_none=True)
                    st.loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
                    self.optim.step()
                    step += 1
                    seen += cfg.batch_size
                    window.append((float(st.loss.detach()), st.correct, st.rows))
                    if step % cfg.log_every == 0 or step == self.total_steps:
                        rate = seen / max(time.time() - t_start, 1e-9)
                        loss = sum(w[0] for w in window) / len(window)
                        acc = sum(w[1] for w in window) / max(1, sum(w[2] for w in window))
                        window.clear()
                        self._log(
                            {
                                "step": step,
                                "epoch": step / self.steps_per_epoch,
                                "loss": loss,
                                "train_accuracy": acc,
                                "sentences_per_s": rate,
                                "lr": lr,
                            }
                        )
                        info = f"loss {loss:.3f} acc {acc:.3f} {rate:,.0f} sent/s"
                        prog.update(task, info=info)
                        self._plain(f"step {step:,}/{self.total_steps:,} {info}")
                    if step % cfg.val_every == 0 or step == self.total_steps:
                        last = self.validate()
                        self._log({"step": step, **last})
                        self._plain(
                            f"step {step:,} validation {self.model.metric} "
                            f"{last['val_accuracy']:.4f} ({self.model.baseline} "
                            f"{last['chance']:.4f}) loss {last['val_loss']:.4f}"
                        )
                    if step % cfg.checkpoint_every == 0 or step == self.total_steps:
                        self.save_checkpoint(step)
                    prog.update(task, completed=step)
            except KeyboardInterrupt:
                self.save_checkpoint(step)
                raise Interrupted(
                    f"interrupted at step {step}; checkpoint saved in {self.out}; "
                    "continue with --resume"
                ) from None
        if last is None:
            last = self.validate()
        return TrainResult(
            self.out, step, last["val_accuracy"], last["chance"], time.time() - t_start,
            self.model.metric, self.model.baseline,
        )


def train(config: TrainConfig, resume: bool = False, progress: bool = True) -> TrainResult:
    """Train a model (QT, FastSent or SDAE) into `config.out` (a model folder); its metrics."""
    return Trainer(config, progress=progress).run(resume=resume)
