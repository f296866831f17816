"""GenSen-style multi-task training (Subramanian et al. 2018): one shared sentence encoder
learns from Quick-Thoughts on ordered text and from NLI pairs (`qtsearch train-multitask`).

The shared encoder is InferSent's BiLSTM-max over frozen GloVe; it is the sentence encoder of
the saved model (vectors = its output, loadable by `load_encoder`). Each task has its own head,
as GenSen gives each task its own decoder: QT scores f(s_i)·g(s_j) with f the shared encoder and
g a task-specific context encoder of the same shape; NLI classifies [u, v, |u−v|, u*v].

Each step trains one task on one batch. The task of every step is fixed in advance from the
seed: `round-robin` alternates QT and NLI; `proportional` draws NLI with probability
(NLI batches per epoch) / (QT + NLI batches per epoch), so both tasks pass over their data at
the same rate. A task's k-th batch is its own trainer's k-th batch (QT blocks exactly as
`qtsearch train` orders them), so `--resume` continues exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.errors import UsageError
from qtsearch.models.objective import BatchStats, pooled, qt_loss
from qtsearch.text.nli import read_nli
from qtsearch.training.nli import NLITrainConfig, NLITrainer, RunResult, glove_encoder
from qtsearch.training.trainer import TrainConfig, Trainer

TASKS = ("qt", "nli")
SCHEDULES = ("proportional", "round-robin")


@dataclass
class MultitaskConfig(NLITrainConfig):
    """The NLI options plus the QT corpus and the schedule; `train` holds the NLI files."""

    corpus: list[str] = field(default_factory=list)
    split_sentences: bool = False
    vocab_size: int = 20_000  # the QT corpus's most frequent words (NLI and GloVe words added)
    qt_batch_size: int = 128
    context: int = 3
    qt_val_blocks: int = 20
    schedule: str = "proportional"

    def check(self) -> None:
        super().check()
        if not self.corpus:
            raise UsageError("give at least one text corpus file or folder for Quick-Thoughts")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"--schedule must be one of {', '.join(SCHEDULES)}")

    def qt_config(self) -> TrainConfig:
        """The QT trainer's data options (its batching is reused, not its model)."""
        return TrainConfig(corpus=self.corpus, out=self.out, objective="qt", encoder="uni",
                           vocab_size=self.vocab_size, max_len=self.max_len,
                           context=self.context, batch_size=self.qt_batch_size,
                           split_sentences=self.split_sentences, seed=self.seed,
                           val_blocks=self.qt_val_blocks, device=self.device,
                           precision=self.precision)


def task_schedule(n_steps: int, batches_per_epoch: tuple[int, int], kind: str,
                  seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(task index of each step (0 = QT, 1 = NLI), position of the step within its task)."""
    if kind == "round-robin":
        tasks = np.arange(n_steps) % 2
    else:
        p_nli = batches_per_epoch[1] / sum(batches_per_epoch)
        tasks = (np.random.default_rng([seed, 1]).random(n_steps) < p_nli).astype(np.int64)
    position = np.zeros(n_steps, dtype=np.int64)
    for t in range(len(TASKS)):
        mask = tasks == t
        position[mask] = np.arange(int(mask.sum()))
    return tasks, position


class MultitaskTrainer(NLITrainer):
    resume_keys = (*NLITrainer.resume_keys, "corpus", "split_sentences", "vocab_size",
                   "qt_batch_size", "context", "schedule", "corpus_signature")
    cfg: MultitaskConfig
    objective = "multitask"

    def prepare(self) -> None:
        cfg = self.cfg
        pairs = read_nli(cfg.train)  # bad NLI files fail before the corpus is tokenised
        self.qt = Trainer(cfg.qt_config(), progress=self.show, console=self.console)
        self.qt.prepare()  # tokenises the corpus into OUT/cache, checks OUT is writable
        self.nli_data(pairs, base=self.qt.data.vocab)  # QT ids stay valid: its vocab is a prefix
        per_epoch = (self.qt.steps_per_epoch, self.nli.steps_per_epoch)
        self.total_steps = cfg.max_steps or cfg.epochs * sum(per_epoch)
        self.tasks, self.position = task_schedule(self.total_steps, per_epoch, cfg.schedule,
                                                  cfg.seed)
        self.say(f"{len(self.qt.data):,} corpus sentences in {self.qt.steps_per_epoch:,} QT "
                 f"batches, {self.nli.steps_per_epoch:,} NLI batches per epoch; "
                 f"{int((self.tasks == 0).sum()):,} QT and {int((self.tasks == 1).sum()):,} "
                 f"NLI steps ({cfg.schedule})")

    def build_model(self) -> None:
        super().build_model()
        self.context_encoder = glove_encoder(self.encoder.cfg, self.vocab, self.n_seen,
                                             self.encoder.frozen.weight.data).to(self.device)

    def heads(self) -> dict[str, nn.Module]:
        return {**super().heads(), "qt_context": self.context_encoder}

    def record(self) -> dict[str, Any]:
        return {**super().record(), "corpus_sentences": len(self.qt.data),
                "corpus_signature": self.qt.data.meta["signature"]}

    def step_loss(self, step: int) -> tuple[str, Tensor, int, int]:
        k = int(self.position[step])
        if self.tasks[step] == 1:
            return super().step_loss(k)
        ids, lengths, docs = self.qt._batch(self.qt.block_at(k))
        with self.autocast():
            f, g = self.encoder(ids, lengths), self.context_encoder(ids, lengths)
        st = qt_loss(f, g, docs, self.cfg.context)
        return "qt", st.loss, st.correct, st.rows

    def validate(self) -> dict[str, float]:
        nli = super().validate()
        self.encoder.eval()
        self.context_encoder.eval()

        def stats(block: int) -> BatchStats:
            ids, lengths, docs = self.qt._batch(block)
            return qt_loss(self.encoder(ids, lengths), self.context_encoder(ids, lengths),
                           docs, self.cfg.context)

        with torch.no_grad(), self.autocast():
            loss, accuracy, chance = pooled(stats(int(block)) for block in self.qt.val_blocks)
        self.encoder.train()
        self.context_encoder.train()
        return {**nli, "qt_val_loss": loss, "qt_val_accuracy": accuracy, "qt_chance": chance}

    def describe(self, val: dict[str, float]) -> str:
        return (f"validation NLI accuracy {val['val_accuracy']:.4f} (majority class "
                f"{val['chance']:.4f}) loss {val['val_loss']:.4f}; QT context accuracy "
                f"{val['qt_val_accuracy']:.4f} (chance {val['qt_chance']:.4f}) "
                f"loss {val['qt_val_loss']:.4f}")


def train_multitask(
    config: MultitaskConfig, resume: bool = False, progress: bool = True
) -> RunResult:
    """Train a shared InferSent encoder on QT + NLI into `config.out` (a model folder)."""
    return MultitaskTrainer(config, progress=progress).run(resume=resume)
