"""`qtsearch adapt`: fit a mean-of-words model to a user's corpus without labels.

The base model (the shipped default, or any mean-of-words model folder) knows general English;
a corpus of papers, manuals or case notes has its own words and its own way of saying things.
Adapting trains, in the one training loop (training/loop.py), on what the corpus itself offers:

- its vocabulary: corpus words the base does not know (at least `min_count` times) get rows of
  their own, started from their composition by the base's pieces table moved towards the
  sentences they occur in (a word is known by the company it keeps), then trained;
- `neighbours`: each sentence and the next one of its document are a positive pair, contrasted
  with the other pairs of the batch (the Quick-Thoughts signal, scored with the shared vectors
  search uses instead of a separate context encoder);
- `titles`: where documents have titles (BEIR records, Wikipedia articles), the title and each
  sentence of its document are a positive pair;
- `ict`: a sentence of a document and the rest of that document are a positive pair (the
  inverse cloze task: a short text against the long one that holds its topic, which is what a
  query against an indexed document is);
- `teacher minilm`: all-MiniLM-L6-v2's vectors of a sample of the corpus's sentences, encoded
  within a time budget, which the model learns to match through a linear head;
- only the rows of words the corpus uses train (no batch holds the others), which is what
  keeps the general skills (docs/adapt.md, "Paraphrase benchmark before and after"). An
  optional L2 pull of those rows towards the base (`anchor`) cost retrieval on both measured
  corpora and is off by default.

The tasks are `loop.Task`s, so progress, checkpoints, Ctrl-C and exact `--resume` are the
loop's. Every twentieth document is held out: each task's validation figure is its in-batch
retrieval on documents the model never trained on, and the figure at step 0 is the base
model's. The adapted model records the base, the corpus and what was learnt in config.json
("train": adapted_from, corpus, adapt_*), which `qtsearch info` shows.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import InputError, Interrupted, UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.files import CONFIG, read_config
from qtsearch.encoders.nn.folder import encoder_config, load_weights, save_model
from qtsearch.encoders.nn.mean_words import MeanWords, in_scope
from qtsearch.encoders.nn.objective import BatchStats
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig
from qtsearch.encoders.pieces import pieces_path
from qtsearch.text.negation import CUE, word_roles
from qtsearch.text.vocab import Vocab
from qtsearch.training.adapt_corpus import (
    Corpus,
    base_folder,
    composed_rows,
    context_vectors,
    corpus_signature,
    corpus_tokens,
    new_words,
    read_documents,
    split_pairs,
    task_pairs,
    teacher_sample,
    teacher_vectors,
)
from qtsearch.training.checkpoint import (
    checkpoint_dir,
    same_run,
    save_heads,
    save_state,
    writable_folder,
)
from qtsearch.training.configs import HELD_OUT, AdaptConfig
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.loop import Loop, RunResult, Runtime, Task
from qtsearch.training.objectives.contrastive import PairsTask
from qtsearch.training.objectives.teacher import TeacherTask

#: Validation batches per task (a fixed sample of the held-out documents' pairs).
VAL_BATCHES = 4


# ----- the tasks ----------------------------------------------------------------------------

class DeltaMean(nn.Module):
    """The mean-of-words encoder as adapting trains it: the start table frozen, a trainable
    offset for the rows of words the corpus uses (the others cannot move: no batch holds them),
    so that the gradient, the optimiser and the pull towards the base touch those rows alone
    (a 50k-word table is 13M numbers, a corpus's words a fraction). `merged()` is the plain
    `MeanWords` the model folder holds."""

    def __init__(self, cfg: EncoderConfig, table: Tensor, trainable: Tensor,
                 negated: Tensor | None, roles: Tensor | None):
        super().__init__()
        self.cfg, self.dim = cfg, cfg.glove_dim
        self.register_buffer("table", table)
        slot = torch.zeros(len(table), dtype=torch.long)
        slot[trainable] = torch.arange(1, len(trainable) + 1)
        self.register_buffer("slot", slot)  # 0: frozen (its offset row stays zero)
        self.delta = nn.Embedding(len(trainable) + 1, cfg.glove_dim, padding_idx=0)
        nn.init.zeros_(self.delta.weight)
        if cfg.negation_scope:
            self.negated = nn.Parameter(negated.clone())
            self.register_buffer("roles", roles.clone())

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        """`MeanWords.forward` of the merged table, as weighted bag sums: the [B, L, dim]
        vectors are never made, which on a long document batch was most of a step. A word in
        a negation's scope counts once plus (negated - 1) times; a cue counts zero."""
        ids = ids[:, : int(lengths.max())]
        slots = self.slot[ids]
        bag = torch.nn.functional.embedding_bag
        keep = (ids != 0).to(self.table.dtype)
        scoped = None
        if self.cfg.negation_scope:
            roles = self.roles[ids]
            cue = roles == CUE
            keep = keep * (~cue)
            scoped = (in_scope(roles) & ~cue).to(self.table.dtype)
        summed = bag(ids, self.table, per_sample_weights=keep, mode="sum") + bag(
            slots, self.delta.weight, per_sample_weights=keep, mode="sum")
        if scoped is not None and bool(scoped.any()):
            inside = bag(ids, self.table, per_sample_weights=scoped, mode="sum") + bag(
                slots, self.delta.weight, per_sample_weights=scoped, mode="sum")
            summed = summed + inside * (self.negated - 1)
        return summed / lengths[:, None].to(summed.dtype)

    def merged(self) -> MeanWords:
        model = MeanWords(self.cfg)
        with torch.no_grad():
            state = {"words.weight": self.table + self.delta.weight[self.slot]}
            if self.cfg.negation_scope:
                state |= {"negated": self.negated, "roles": self.roles}
            model.load_state_dict({k: v.detach().cpu() for k, v in state.items()})
        return model


class Anchored:
    """A task whose loss adds `weight` × the squared offsets of the base words' rows from the
    base table (rows 1..n_base of `delta`): the pull that keeps the adapted model close to the
    general one; new words' rows are free."""

    def __init__(self, task: Task, delta: nn.Embedding, n_base: int, weight: float):
        self.task, self.delta, self.n_base, self.weight = task, delta, n_base, weight
        self.name, self.metric, self.baseline = task.name, task.metric, task.baseline
        self.steps_per_epoch = task.steps_per_epoch
        self.sentences_per_batch = task.sentences_per_batch

    def heads(self) -> dict[str, nn.Module]:
        return self.task.heads()

    def batch_loss(self, k: int) -> BatchStats:
        st = self.task.batch_loss(k)
        if not self.weight or not self.n_base:
            return st
        drift = self.delta.weight[1 : self.n_base + 1].pow(2).sum()
        return dataclasses.replace(st, loss=st.loss + self.weight * drift)

    def validate(self) -> tuple[float, float, float]:
        return self.task.validate()


# ----- the run ------------------------------------------------------------------------------

class AdaptLoop(Loop):
    """The one loop, stopped cleanly at a deadline (--max-minutes), writing the base model's
    search settings (fit, BM25 weight) into the adapted model's config.json."""

    def __init__(self, *args: Any, deadline: float | None = None,
                 search: dict[str, Any] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.deadline, self.search, self.timed_out = deadline, search or {}, False

    def train_step(self, t: int, position: int, stop: bool) -> tuple[list[float], bool]:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.timed_out = stop = True
        return super().train_step(t, position, stop)

    def save(self, step: int) -> None:
        """As `Loop.save`, the model folder holding the merged table (a plain mean model)."""
        if not self.rt.world.main:
            return
        save_state(self.out, self.modules, self.optim, step, self.run_config(), self.facts)
        save_model(self.out, self.encoder.merged(), self.vocab, self.record())
        heads = {k: m for k, m in self.modules.items() if k != "encoder"}
        if heads:
            save_heads(self.out, heads)
        if self.search:
            config = json.loads((self.out / CONFIG).read_text(encoding="utf-8"))
            config["search"] = self.search
            write_json_atomic(self.out / CONFIG, config)
        # the base's pieces still compose the words neither it nor the corpus taught (a
        # query's); the table is fitted to base rows, which adapting leaves close
        pieces = pieces_path(self.facts["adapted_from"])
        if pieces.is_file():
            shutil.copyfile(pieces, pieces_path(self.out))


def adapt_loop(config: AdaptConfig, reporter: Reporter | None = None,
               started: float | None = None, resume: bool = False) -> AdaptLoop:
    """Everything of an adaptation but the running: corpus, vocabulary, encoder, tasks."""
    started = time.monotonic() if started is None else started
    config.check()
    base = base_folder(config.model)
    base_config = read_config(base)
    cfg = encoder_config(base_config)
    runtime, display = Runtime.of(config), first_rank_only(reporter)
    out = Path(config.out)
    if out.resolve() == base.resolve():
        raise UsageError(f"{out}: the output folder is the base model; choose another --out")
    writable_folder(out)
    docs = read_documents(config.corpus, config.split_sentences)
    corpus = corpus_tokens(docs)
    base_encoder = load_weights(base, cfg)
    from qtsearch.encoders.files import read_vocab

    base_vocab = read_vocab(base, cfg)
    table = base_encoder.words.weight.detach().numpy()
    added = new_words(corpus, base_vocab, config.new_words, config.min_count)
    vocab = Vocab(base_vocab.words + added)
    n_sent = len(corpus.sentences)
    display.note(f"adapting {base} to {len(docs):,} documents ({n_sent:,} sentences, "
                 f"{int((corpus.titles.lengths() > 0).sum()):,} titled); "
                 f"{len(added):,} new words")
    grown = dataclasses.replace(cfg, vocab_size=len(vocab), max_len=config.max_len or cfg.max_len)
    rows = torch.from_numpy(table)
    if added:
        rows = torch.cat([rows, torch.from_numpy(
            context_vectors(table, base_vocab, corpus, added,
                            composed_rows(base, added, table.shape[1])))])
    lookup = corpus.lookup(vocab)  # each corpus token's id in the grown vocabulary
    # the rows the corpus uses: base words first (the anchored ones), then the new words
    used = np.zeros(len(vocab), dtype=bool)
    used[lookup[corpus.sentences.flat]] = used[lookup[corpus.titles.flat]] = True
    used[:2] = False
    trainable = np.flatnonzero(used)
    n_base = int((trainable < len(base_vocab)).sum())
    roles = None
    if cfg.negation_scope:  # negation cues among the new words
        roles = torch.from_numpy(word_roles(vocab.words)).float()
    negated = getattr(base_encoder, "negated", None)
    encoder = DeltaMean(grown, rows.float(), torch.from_numpy(trainable),
                        None if negated is None else negated.detach(), roles).to(runtime.device)
    pairs = task_pairs(corpus, lookup, grown.max_len, config.doc_len)
    wanted = {"neighbours": config.neighbours, "titles": config.titles, "ict": config.ict}
    tasks: list[Task] = []
    facts: dict[str, Any] = {
        "adapted_from": str(base), "corpus_signature": corpus_signature(config.corpus),
        "adapt_documents": len(docs), "adapt_sentences": n_sent, "adapt_new_words": len(added)}
    for i, (name, items) in enumerate(pairs.items()):
        if not wanted[name]:
            continue
        train, valid = split_pairs(items)
        if len(train) < 2 or len(valid) < 2:
            display.note(f"{name}: {len(train):,} training pairs, {len(valid):,} held out: "
                         "too few, left out")
            continue
        task = PairsTask(train, valid, config.batch_size, config.seed + i, encoder,
                         config.scale, VAL_BATCHES, runtime, name)
        tasks.append(task)
        facts[f"adapt_{name}_pairs"] = len(train)
    if config.teacher:
        teacher = teacher_task(config, corpus, lookup, grown.max_len, encoder, runtime,
                               display, out, resume)
        if teacher is not None:
            tasks.append(teacher)
            facts["adapt_teacher_sentences"] = len(teacher.ids)
    if not tasks:
        raise InputError("the corpus is too small to adapt to: no task has pairs both to "
                         "train on and to hold out (it needs documents of two or more "
                         "sentences, at least 20 of them)")
    tasks = [Anchored(t, encoder.delta, n_base, config.anchor) for t in tasks]
    deadline = started + 60 * config.max_minutes if config.max_minutes else None
    return AdaptLoop(config, runtime, display, encoder, vocab, tasks, facts, "proportional",
                     deadline=deadline, search=base_config.get("search"))


#: The teacher's sentences and vectors, kept in the output folder so --resume trains on the
#: very sample the budget allowed.
TEACHER_FILE = "adapt_teacher.npz"


def teacher_task(config: AdaptConfig, corpus: Corpus, lookup: np.ndarray, max_len: int,
                 encoder: nn.Module, runtime: Runtime, display: Reporter, out: Path,
                 resume: bool) -> TeacherTask | None:
    """MiniLM's view of a corpus sample as a task (None: the budget encoded too few)."""
    sample = teacher_sample(corpus, config.teacher_sample, config.seed)
    saved = out / TEACHER_FILE
    if resume and saved.is_file():
        with np.load(saved) as z:
            vectors, n = z["vectors"], int(z["count"])
    else:
        texts = [corpus.text(int(s)) for s in sample]
        vectors = teacher_vectors(texts, config.teacher_budget, config.device, display)
        n = len(vectors)
        tmp = out / (TEACHER_FILE + ".tmp.npz")
        np.savez(tmp, vectors=vectors, count=n)
        os.replace(tmp, saved)
    sample = sample[:n]
    held = np.flatnonzero(corpus.doc_of_sentence[sample] % HELD_OUT == 0)
    if n < 2 * config.batch_size or len(held) < 2:
        display.note(f"teacher: {n:,} sentences encoded within the budget: too few, left out")
        return None
    ids = corpus.sentences.take(sample).encoded(lookup, max_len)
    head = nn.Linear(encoder.dim, vectors.shape[1]).to(runtime.device)
    batch = min(config.batch_size, len(held))
    display.note(f"teacher: {n:,} corpus sentences with MiniLM vectors ({len(held):,} held out)")
    return TeacherTask(ids, vectors, held[: batch * max(1, len(held) // batch)], batch,
                       config.seed + 10, encoder, head, runtime)


@dataclass
class AdaptResult:
    run: RunResult
    stopped_early: bool

    def summary(self) -> str:
        text = self.run.summary()
        if self.stopped_early:
            text += ("\nstopped at --max-minutes; the model holds that step's weights "
                     "(continue with --resume)")
        return text


def adapt(config: AdaptConfig, resume: bool = False,
          reporter: Reporter | None = None) -> AdaptResult:
    """Adapt the base model to `config.corpus` into `config.out` (a model folder)."""
    started = time.monotonic()
    loop = adapt_loop(config, reporter, started, resume)
    try:
        return AdaptResult(loop.run(resume), False)
    except Interrupted:
        if not loop.timed_out:
            raise
    step = int(json.loads((Path(config.out) / "checkpoint" / "state.json").read_text())["step"])
    last = loop.validate()
    loop.display.note(loop.describe(step, last))
    return AdaptResult(RunResult(loop.out, step, None, last, time.monotonic() - started,
                                 loop.tasks), True)


def adapt_once(config: AdaptConfig, reporter: Reporter | None = None) -> AdaptResult:
    """`build-index --adapt`: the model folder `config.out` adapted to `config.corpus`, made
    once. A checkpoint there of the same run (same options, same corpus files) is resumed, so a
    rebuild after a finished adaptation trains no step and one after an interrupted adaptation
    finishes it; anything else in the folder is replaced by a fresh adaptation."""
    state = checkpoint_dir(Path(config.out)) / "state.json"
    resume = False
    if state.is_file():
        saved = json.loads(state.read_text())
        try:
            same_run(saved["config"], config, saved.get("data", {}),
                     {"corpus_signature": corpus_signature(config.corpus)})
            resume = True
        except UsageError:
            if reporter is not None:
                reporter.note(f"{config.out} holds an adaptation of other files or with other "
                              "options: adapting anew")
    return adapt(config, resume=resume, reporter=reporter)
