"""Training an InferSent encoder on NLI pairs (`qtsearch train-nli`).

Data: labelled pairs from any of the layouts of `qtsearch.text.nli`. Validation is a separate
file (`valid`) or, without one, a held-out share of the training *premises* with all their
pairs; training pairs that share a sentence with a validation pair are dropped, so no
validation sentence is ever trained on.

Vocabulary: every word of the training pairs (case kept, as the tokeniser gives it) followed by
the most frequent GloVe words in lowercase and capitalised form, so that sentences of other
domains (`qtsearch eval`, indexes) still meet their words' GloVe vectors. Trainable embedding
rows (`word_dim` > 0) of words never seen in training stay zero: only GloVe speaks for them.

Optimiser: Adam (lr 1e-3) rather than the paper's SGD (lr 0.1, decayed over ~20 epochs of
570k pairs): the data reachable here is ~15k pairs and a run has minutes, where Adam converges
in a few epochs. Batches are drawn from a permutation fixed by (seed, epoch), so the step alone
fixes the data position and `--resume` continues exactly, as in the QT trainer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from qtsearch.config import write_json_atomic
from qtsearch.device import autocast_dtype, resolve_device
from qtsearch.encode.pretrained import glove_matrix, load_glove
from qtsearch.errors import InputError, Interrupted, ModelError, OutputError, UsageError
from qtsearch.models.encoders import EncoderConfig
from qtsearch.models.folder import METRICS, save_model
from qtsearch.models.infersent import InferSent, NLIClassifier
from qtsearch.text.nli import NLIPair, label_counts, read_nli
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import PAD, UNK, Vocab
from qtsearch.training.trainer import _stop_signals_save_checkpoint, check_run_options

log = logging.getLogger("qtsearch")

#: Task heads (the NLI classifier, the multi-task QT context encoder) live beside the encoder's
#: weights: `load_encoder` never reads them, `--resume` and further training do.
HEADS = "heads.safetensors"
CHECKPOINT = "checkpoint"


@dataclass
class NLITrainConfig:
    """Everything that defines an NLI run; saved under "train" in the model's config.json."""

    train: list[str] = field(default_factory=list)
    out: str = "model"
    valid: list[str] = field(default_factory=list)
    valid_fraction: float = 0.1
    hidden: int = 256  # per direction; the paper's 2048 is GPU-sized
    word_dim: int = 0  # trainable embeddings concatenated to GloVe; 0 = GloVe only (the paper)
    glove_words: int = 50_000
    fc_dim: int = 512
    dropout: float = 0.1
    max_len: int = 50
    batch_size: int = 64
    lr: float = 1e-3
    clip_norm: float = 5.0
    epochs: int = 5
    max_steps: int | None = None
    device: str = "auto"
    precision: str = "auto"
    seed: int = 0
    val_every: int = 200
    checkpoint_every: int = 500
    log_every: int = 20

    def check(self) -> None:
        if not self.train:
            raise UsageError("give at least one NLI training file")
        check_run_options(self, ("hidden", "fc_dim", "max_len", "batch_size", "epochs",
                                 "val_every", "checkpoint_every", "log_every"))
        if self.word_dim < 0 or self.glove_words < 0:
            raise UsageError("--word-dim and --glove-words must be 0 or more")
        if not 0 < self.valid_fraction < 1:
            raise UsageError("--valid-fraction must be between 0 and 1")
        if not 0 <= self.dropout < 1:
            raise UsageError("--dropout must be in [0, 1)")


# ----- data ---------------------------------------------------------------------------------
def split_by_premise(
    pairs: Sequence[NLIPair], fraction: float, seed: int
) -> tuple[list[NLIPair], list[NLIPair]]:
    """(train, valid): a random `fraction` of the distinct premises, with all their pairs, held
    out; training pairs that share any sentence with a validation pair are dropped (SICK reuses
    sentences across pairs, in both roles). Raises InputError when either side would be empty."""
    premises = sorted({p.premise for p in pairs})
    rng = np.random.default_rng(seed)
    n_valid = round(len(premises) * fraction)
    held = {premises[i] for i in rng.permutation(len(premises))[:n_valid]}
    valid = [p for p in pairs if p.premise in held]
    seen = {s for p in valid for s in (p.premise, p.hypothesis)}
    train = [p for p in pairs if p.premise not in seen and p.hypothesis not in seen]
    if not train or not valid:
        raise InputError(f"{len(premises)} distinct premises cannot be split into training and "
                         "validation; give more pairs or a --valid file")
    return train, valid


def build_vocab(
    token_lists: Iterable[list[str]], glove_words: int, base: Vocab | None = None
) -> tuple[Vocab, int]:
    """(vocabulary, n_seen): `base` (or <pad>, <unk>) + the words of `token_lists` by frequency
    + the `glove_words` most frequent GloVe words, lowercase and capitalised. Ids below n_seen
    are words that training data contains."""
    seen = Vocab.build(token_lists, size=10**9).words[2:]
    words = list(base.words) if base else [PAD, UNK]
    known = set(words)
    for w in seen:
        if w not in known:
            known.add(w)
            words.append(w)
    n_seen = len(words)
    if glove_words:
        index, _ = load_glove()
        for w in sorted(index, key=index.__getitem__)[:glove_words]:
            for form in (w, w.capitalize()):
                if form not in known:
                    known.add(form)
                    words.append(form)
    return Vocab(words), n_seen


def pad_ids(rows: Sequence[list[int]]) -> tuple[Tensor, Tensor]:
    """Right-padded ids [B, T] and lengths [B]."""
    lengths = [len(r) for r in rows]
    out = np.zeros((len(rows), max(lengths)), dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return torch.from_numpy(out), torch.tensor(lengths)


@dataclass
class NLISet:
    """Pairs as token ids: premises, hypotheses and labels, row-aligned."""

    premises: list[list[int]]
    hypotheses: list[list[int]]
    labels: np.ndarray

    @classmethod
    def encode(cls, pairs: Sequence[NLIPair], vocab: Vocab, max_len: int,
               tokens: Callable[[str], list[str]]) -> NLISet:
        return cls(
            [vocab.encode(tokens(p.premise), max_len) for p in pairs],
            [vocab.encode(tokens(p.hypothesis), max_len) for p in pairs],
            np.asarray([p.label for p in pairs], dtype=np.int64),
        )

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, rows: Sequence[int], device: torch.device) -> tuple[Tensor, ...]:
        """(premise ids, lengths, hypothesis ids, lengths, labels) on `device`."""
        ip, lp = pad_ids([self.premises[i] for i in rows])
        ih, lh = pad_ids([self.hypotheses[i] for i in rows])
        y = torch.from_numpy(self.labels[np.asarray(rows)])
        return tuple(t.to(device) for t in (ip, lp, ih, lh, y))


class NLITask:
    """NLI as a task for a sentence encoder: data order, loss and validation. Shared by the NLI
    trainer and the multi-task trainer, which plug in their own encoder and classifier."""

    def __init__(self, train: NLISet, valid: NLISet, batch_size: int, seed: int):
        self.train, self.valid = train, valid
        self.batch_size = min(batch_size, len(train))
        self.seed = seed
        self.steps_per_epoch = max(1, len(train) // self.batch_size)
        counts = np.bincount(valid.labels, minlength=3)
        self.chance = float(counts.max() / counts.sum())  # the majority-class rate

    def rows_at(self, step: int) -> np.ndarray:
        """The training rows of `step` (0-based): a fixed function of seed and step."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.train))
        return order[pos * self.batch_size : (pos + 1) * self.batch_size]

    @staticmethod
    def loss(encoder: nn.Module, head: NLIClassifier, batch: Sequence[Tensor],
             autocast: Callable[[], contextlib.AbstractContextManager]) -> tuple[Tensor, int]:
        """(mean cross-entropy in fp32, correct predictions) of one batch."""
        ip, lp, ih, lh, y = batch
        with autocast():
            logits = head(encoder(ip, lp), encoder(ih, lh))
        logits = logits.float()
        return nn.functional.cross_entropy(logits, y), int((logits.argmax(1) == y).sum())

    def evaluate(self, encoder: nn.Module, head: NLIClassifier, device: torch.device,
                 autocast: Callable[[], contextlib.AbstractContextManager],
                 batch_size: int = 256) -> dict[str, float]:
        """Validation loss and accuracy (chance: the majority class's share)."""
        encoder.eval()
        head.eval()
        loss = correct = 0.0
        with torch.no_grad():
            for s in range(0, len(self.valid), batch_size):
                rows = range(s, min(s + batch_size, len(self.valid)))
                st_loss, st_correct = self.loss(encoder, head, self.valid.batch(rows, device),
                                                autocast)
                loss += float(st_loss) * len(rows)
                correct += st_correct
        encoder.train()
        head.train()
        n = len(self.valid)
        return {"val_loss": loss / n, "val_accuracy": correct / n, "chance": self.chance}


def glove_encoder(cfg: EncoderConfig, vocab: Vocab, n_seen: int,
                  frozen: Tensor | None = None) -> InferSent:
    """A fresh InferSent with its GloVe table filled (from `frozen` when given, else looked up)
    and the trainable rows of words unseen in training zeroed."""
    model = InferSent(cfg)
    if frozen is None:
        matrix, coverage = glove_matrix(vocab.words)
        frozen = torch.from_numpy(matrix)
        log.info("GloVe covers %.1f%% of the vocabulary", 100 * coverage)
    model.set_frozen_vectors(frozen)
    if model.words is not None:
        with torch.no_grad():
            model.words.weight[n_seen:].zero_()
    return model


# ----- checkpoints --------------------------------------------------------------------------
def save_heads(folder: Path, heads: dict[str, nn.Module]) -> None:
    tensors = {f"{name}.{k}": v.detach().cpu().contiguous()
               for name, mod in heads.items() for k, v in mod.state_dict().items()}
    tmp = folder / (HEADS + ".tmp")
    save_file(tensors, str(tmp))
    tmp.replace(folder / HEADS)


def save_state(folder: Path, modules: dict[str, nn.Module], optim: torch.optim.Optimizer,
               step: int, record: dict[str, Any]) -> None:
    """A resumable checkpoint in `folder`/checkpoint: weights, optimiser state, RNG, step
    (safetensors and JSON only, replaced as a whole)."""
    ckpt, tmp = folder / CHECKPOINT, folder / (CHECKPOINT + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    tensors = {f"model.{name}.{k}": v.detach().cpu().contiguous()
               for name, mod in modules.items() for k, v in mod.state_dict().items()}
    opt = optim.state_dict()
    for i, st in opt["state"].items():
        for k, v in st.items():
            tensors[f"opt.{i}.{k}"] = torch.as_tensor(v).detach().cpu().contiguous()
    tensors["rng.torch"] = torch.get_rng_state()
    save_file(tensors, str(tmp / "state.safetensors"))
    write_json_atomic(tmp / "state.json", {"step": step, "param_groups": opt["param_groups"],
                                           "config": record})
    shutil.rmtree(ckpt, ignore_errors=True)
    tmp.rename(ckpt)


def load_state(folder: Path, modules: dict[str, nn.Module], optim: torch.optim.Optimizer,
               device: torch.device, same_run: Callable[[dict[str, Any]], None]) -> int:
    """Restore a `save_state` checkpoint into `modules` and `optim` and return its step;
    `same_run(saved config)` vets the options first, so a changed option is named as such."""
    ckpt = folder / CHECKPOINT
    try:
        state = json.loads((ckpt / "state.json").read_text())
        step = int(state["step"])
        same_run(state["config"])
        tensors = load_file(str(ckpt / "state.safetensors"))
        for name, mod in modules.items():
            prefix = f"model.{name}."
            mod.load_state_dict({k[len(prefix):]: v for k, v in tensors.items()
                                 if k.startswith(prefix)})
    except FileNotFoundError as e:
        raise ModelError(f"{folder}: no checkpoint to resume from (run again without "
                         "--resume)") from e
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as e:
        why = " ".join(str(e).split())[:200]
        raise ModelError(f"{ckpt}: corrupt checkpoint or different model ({why})") from e
    opt_state: dict[int, dict[str, Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, i, name = k.split(".", 2)
            opt_state.setdefault(int(i), {})[name] = v.to(device) if v.dim() else v
    optim.load_state_dict({"state": opt_state, "param_groups": state["param_groups"]})
    torch.set_rng_state(tensors["rng.torch"])
    return step


def writable_folder(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise OutputError(f"{out}: cannot write the model folder ({e.strerror})") from e


class MetricsLog:
    """metrics.jsonl of a model folder: one JSON line per log interval and per validation."""

    def __init__(self, folder: Path, step: int):
        self.path = folder / METRICS
        if step == 0:
            self.path.unlink(missing_ok=True)
        elif self.path.is_file():  # drop lines written after the checkpoint
            keep = [ln for ln in self.path.read_text().splitlines()
                    if ln.strip() and json.loads(ln).get("step", 0) <= step]
            self.path.write_text("".join(ln + "\n" for ln in keep))

    def __call__(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")


# ----- trainer ------------------------------------------------------------------------------
@dataclass
class RunResult:
    out: Path
    steps: int
    first: dict[str, float] | None  # validation at step 0 (None when resumed)
    last: dict[str, float]  # validation at the end
    seconds: float


class NLITrainer:
    """The loop (batches, logging, validation, checkpoints, Ctrl-C) with per-task hooks:
    `prepare`, `build_model`, `heads`, `step_loss`, `validate`; the multi-task trainer
    overrides them."""

    #: Options that must match the checkpoint for --resume.
    resume_keys: tuple[str, ...] = ("train", "valid", "hidden", "word_dim", "batch_size",
                                    "seed", "lr", "train_pairs")
    #: The model folder's objective (folder.MODELS key).
    objective = "nli"

    def __init__(self, config: NLITrainConfig, progress: bool = True,
                 console: Console | None = None):
        config.check()
        self.cfg = config
        self.out = Path(config.out)
        self.show = progress
        self.console = console or Console(stderr=True)
        self.device = resolve_device(config.device)
        self.amp = autocast_dtype(self.device, config.precision)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.amp is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp)

    def say(self, line: str) -> None:
        if self.show:
            self.console.print(line, highlight=False)

    # ----- hooks --------------------------------------------------------------------------
    def nli_data(self, pairs: list[NLIPair], base: Vocab | None = None) -> None:
        """Split (or read --valid), build the vocabulary on top of `base`, encode the pairs."""
        cfg = self.cfg
        if cfg.valid:
            train, valid = pairs, read_nli(cfg.valid)
        else:
            train, valid = split_by_premise(pairs, cfg.valid_fraction, cfg.seed)
        cache: dict[str, list[str]] = {}

        def tokens(s: str) -> list[str]:
            if s not in cache:
                cache[s] = tokenize(s)
            return cache[s]

        self.vocab, self.n_seen = build_vocab(
            (tokens(s) for p in train for s in (p.premise, p.hypothesis)), cfg.glove_words, base)
        self.nli = NLITask(NLISet.encode(train, self.vocab, cfg.max_len, tokens),
                           NLISet.encode(valid, self.vocab, cfg.max_len, tokens),
                           cfg.batch_size, cfg.seed)
        dropped = 0 if cfg.valid else len(pairs) - len(train) - len(valid)
        self.data_record = {"train_pairs": len(train), "valid_pairs": len(valid),
                            "dropped_pairs": dropped,
                            "train_labels": label_counts(train),
                            "valid_labels": label_counts(valid)}
        self.say(f"{len(train):,} training pairs, {len(valid):,} validation pairs "
                 f"({'--valid' if cfg.valid else 'held-out premises'}, {dropped:,} dropped "
                 "for sharing a sentence with validation); vocabulary "
                 f"{len(self.vocab):,} words ({self.n_seen:,} seen in training)")

    def prepare(self) -> None:
        pairs = read_nli(self.cfg.train)
        writable_folder(self.out)
        self.nli_data(pairs)
        self.total_steps = self.cfg.max_steps or self.cfg.epochs * self.nli.steps_per_epoch

    def encoder_config(self) -> EncoderConfig:
        cfg = self.cfg
        return EncoderConfig(encoder="infersent", objective=self.objective,
                             vocab_size=len(self.vocab), word_dim=cfg.word_dim,
                             hidden=cfg.hidden, max_len=cfg.max_len)

    def build_model(self) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed)
        self.encoder = glove_encoder(self.encoder_config(), self.vocab,
                                     self.n_seen).to(self.device)
        self.head = NLIClassifier(self.encoder.dim, cfg.fc_dim, cfg.dropout).to(self.device)

    def heads(self) -> dict[str, nn.Module]:
        """Trained modules besides the encoder (saved in heads.safetensors)."""
        return {"nli": self.head}

    def step_loss(self, step: int) -> tuple[str, Tensor, int, int]:
        """(task, loss, correct, rows) of training step `step` (0-based)."""
        rows = self.nli.rows_at(step)
        loss, correct = self.nli.loss(self.encoder, self.head,
                                      self.nli.train.batch(rows, self.device), self.autocast)
        return "nli", loss, correct, len(rows)

    def validate(self) -> dict[str, float]:
        return self.nli.evaluate(self.encoder, self.head, self.device, self.autocast)

    def describe(self, val: dict[str, float]) -> str:
        return (f"validation accuracy {val['val_accuracy']:.4f} (majority class "
                f"{val['chance']:.4f}) loss {val['val_loss']:.4f}")

    # ----- loop ---------------------------------------------------------------------------
    def record(self) -> dict[str, Any]:
        return {"trainer": type(self).__name__, **dataclasses.asdict(self.cfg),
                **self.data_record}

    def same_run(self, old: dict[str, Any]) -> None:
        """--resume: refuse options that differ from the checkpoint's."""
        new = self.record()
        for key in self.resume_keys:
            if old.get(key) != new.get(key):
                raise UsageError(f"--resume: --{key.replace('_', '-')} differs from the "
                                 f"checkpoint ({old.get(key)} there, {new.get(key)} now)")

    def modules(self) -> dict[str, nn.Module]:
        return {"encoder": self.encoder, **self.heads()}

    def save(self, step: int) -> None:
        """Checkpoint and refresh the model folder (what `load_encoder` reads)."""
        save_state(self.out, self.modules(), self.optim, step, self.record())
        save_model(self.out, self.encoder, self.vocab, self.record())
        save_heads(self.out, self.heads())

    def run(self, resume: bool = False) -> RunResult:
        self.prepare()
        self.build_model()
        params = [p for m in self.modules().values() for p in m.parameters() if p.requires_grad]
        self.optim = torch.optim.Adam(params, lr=self.cfg.lr)
        cfg = self.cfg
        step = 0
        if resume:
            step = load_state(self.out, self.modules(), self.optim, self.device, self.same_run)
        else:
            shutil.rmtree(self.out / CHECKPOINT, ignore_errors=True)
        log_row = MetricsLog(self.out, step)
        first = None
        if step == 0:
            first = self.validate()
            log_row({"step": 0, **first})
            self.say(f"step 0 {self.describe(first)}")
        last = first
        t0 = time.time()
        windows: dict[str, list[tuple[float, int, int]]] = {}
        for m in self.modules().values():
            m.train()
        with _stop_signals_save_checkpoint():
            try:
                while step < self.total_steps:
                    task, loss, correct, rows = self.step_loss(step)
                    self.optim.zero_grad(set_to_none=True)
                    loss.backward()
                    nn.utils.clip_grad_norm_(params, cfg.clip_norm)
                    self.optim.step()
                    step += 1
                    windows.setdefault(task, []).append((float(loss.detach()), correct, rows))
                    if step % cfg.log_every == 0 or step == self.total_steps:
                        rate = step / max(time.time() - t0, 1e-9)
                        for task, window in windows.items():
                            mean_loss = sum(w[0] for w in window) / len(window)
                            acc = sum(w[1] for w in window) / max(1, sum(w[2] for w in window))
                            log_row({"step": step, "task": task, "loss": mean_loss,
                                     "train_accuracy": acc, "batches": len(window)})
                            self.say(f"step {step:,}/{self.total_steps:,} {task} loss "
                                     f"{mean_loss:.3f} acc {acc:.3f} ({rate:.1f} steps/s)")
                        windows.clear()
                    if step % cfg.val_every == 0 or step == self.total_steps:
                        last = self.validate()
                        log_row({"step": step, **last})
                        self.say(f"step {step:,} {self.describe(last)}")
                    if step % cfg.checkpoint_every == 0 or step == self.total_steps:
                        self.save(step)
            except KeyboardInterrupt:
                self.save(step)
                raise Interrupted(f"interrupted at step {step}; checkpoint saved in {self.out}; "
                                  "continue with --resume") from None
        if last is None:
            last = self.validate()
        return RunResult(self.out, step, first, last, time.time() - t0)


def train_nli(config: NLITrainConfig, resume: bool = False, progress: bool = True) -> RunResult:
    """Train InferSent into `config.out` (a model folder `load_encoder` reads)."""
    return NLITrainer(config, progress=progress).run(resume=resume)
