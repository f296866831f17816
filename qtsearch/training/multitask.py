"""GenSen-style multi-task training (Subramanian et al. 2018): one shared sentence encoder
learns from Quick-Thoughts on ordered text, from NLI pairs, given --pairs from paraphrase
pairs, given --qa from questions and the sentences answering them (SQuAD, MedQuAD) and,
given --teacher, from all-MiniLM-L6-v2's vectors of unlabelled sentences
(`qtsearch train-multitask`).

The shared encoder is InferSent's BiLSTM-max over frozen GloVe (or, `--encoder mean`, the mean
of trainable word vectors started from --word-vectors); it is the sentence encoder of
the saved model (vectors = its output, loadable by `load_encoder`). Each task has its own head,
as GenSen gives each task its own decoder: QT scores f(s_i)·g(s_j) with f the shared encoder and
g a task-specific context encoder of the same shape; NLI classifies [u, v, |u−v|, u*v]; the
pairs task (training/pairs_trainer.py) compares the shared encoder's vectors directly; the
teacher task (training/teacher_setup.py) projects them to the teacher's width.

Each step trains one task on one batch, chosen by `loop.task_schedule` (`proportional`: drawn
in proportion to the tasks' batches per epoch, so both pass over their data at the same rate;
`round-robin`: in turn). QT batches are the blocks `qtsearch train` would use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from qtsearch.core.progress import Reporter
from qtsearch.encoders.nn.objective import BatchStats, qt_loss
from qtsearch.text.datasets.nli_data import read_nli
from qtsearch.text.datasets.paraphrase_data import read_pairs
from qtsearch.text.datasets.qa import read_qa
from qtsearch.training.checkpoint import writable_folder
from qtsearch.training.configs import MultitaskConfig
from qtsearch.training.distributed import first_rank_only
from qtsearch.training.infersent_setup import (
    pair_encoder_config,
    pairs_vocab,
    pretrained_vectors,
    sentence_encoder,
)
from qtsearch.training.loop import Loop, RunResult, Runtime, Task
from qtsearch.training.nli_trainer import nli_sentences, nli_split, nli_task
from qtsearch.training.objectives.corpus import CorpusTask
from qtsearch.training.pairs_trainer import (
    pair_sentences,
    pairs_split,
    pairs_task,
    qa_split,
    without_eval_sentences,
)
from qtsearch.training.teacher_setup import minilm_teacher, teacher_data, teacher_task
from qtsearch.training.trainer import corpus_blocks


def multitask_loop(config: MultitaskConfig, reporter: Reporter | None = None) -> Loop:
    """Everything of a run but the running: every task's data, the shared encoder, the heads.
    A task left out (no corpus, no --nli, ...) is simply not trained: the ablations."""
    config.check()
    runtime, display = Runtime.of(config), first_rank_only(reporter)
    writable_folder(Path(config.out))
    # bad input files fail before the corpus is tokenised
    nli_pairs = read_nli(config.train) if config.train else []
    paraphrases = read_pairs(config.pairs) if config.pairs else []
    questions = read_qa(config.qa) if config.qa else []
    teacher = teacher_data(config, config.seed, display,
                           lambda: minilm_teacher(config.device)) if config.teacher else None
    blocks = corpus_blocks(config.corpus, Path(config.out), config.split_sentences,
                           config.vocab_size, config.max_len, config.qt_batch_size,
                           config.qt_val_blocks, config.seed, display) if config.corpus else None
    sentences: list[str] = []
    facts: dict[str, Any] = {}
    if blocks:
        display.note(f"QT: {len(blocks.data):,} corpus sentences in {blocks.steps_per_epoch:,} "
                     "batches per epoch")
        facts |= blocks.facts()
    if nli_pairs:
        if config.eval_filter:
            nli_pairs, dropped, where = without_eval_sentences(nli_pairs, config)
            display.note(f"NLI: {dropped:,} pairs dropped for sharing a sentence {where}")
            facts["nli_dropped_eval"] = dropped
        nli = nli_split(config, nli_pairs, display)
        sentences += nli_sentences(nli.train)
        facts |= nli.facts
    if paraphrases:
        pairs = pairs_split(paraphrases, config.pairs_valid, config.valid_fraction, config.seed,
                            config, display)
        sentences += pair_sentences(pairs.train)
        facts |= pairs.facts
    if questions:
        qa = qa_split(questions, config.qa_valid_fraction, config.seed, config, display)
        sentences += pair_sentences(qa.train)
        facts |= qa.facts
    if teacher:
        sentences += teacher.sentences
        facts |= teacher.facts
    # the corpus vocabulary first: QT token ids stay valid
    vocab, n_seen, tokens, vocab_facts = pairs_vocab(sentences, config, display,
                                                     base=blocks.data.vocab if blocks else None)
    facts |= vocab_facts
    torch.manual_seed(config.seed)
    pretrained = pretrained_vectors(config.word_vectors, vocab, display)
    encoder = sentence_encoder(pair_encoder_config(config, len(vocab), "multitask"), vocab, n_seen,
                               pretrained).to(runtime.device)
    tasks: list[Task] = []
    if nli_pairs:
        tasks.append(nli_task(config, nli, vocab, tokens, encoder, runtime))
    if blocks:
        context = sentence_encoder(encoder.cfg, vocab, n_seen, pretrained).to(runtime.device)

        def objective(ids: Tensor, lengths: Tensor, docs: Tensor,
                      rng: np.random.Generator) -> BatchStats:
            return qt_loss(encoder(ids, lengths), context(ids, lengths), docs, config.context)

        tasks.append(CorpusTask("qt", blocks, objective, runtime, "context accuracy", "chance",
                                heads={"qt_context": context}))
    if paraphrases:
        tasks.append(pairs_task(config, pairs, vocab, config.max_len, tokens,
                                config.pairs_batch_size, config.seed, encoder, runtime))
    if questions:
        tasks.append(pairs_task(config, qa, vocab, config.max_len, tokens, config.qa_batch_size,
                                config.seed, encoder, runtime, "qa"))
    if teacher:
        tasks.append(teacher_task(config, teacher, vocab, config.max_len, tokens, config.seed,
                                  encoder, runtime))
    return Loop(config, runtime, display, encoder, vocab, tasks, facts, config.schedule)


def train_multitask(config: MultitaskConfig, resume: bool = False,
                    reporter: Reporter | None = None) -> RunResult:
    """Train a shared encoder on QT, NLI, pairs and the teacher (those given) into `config.out`."""
    return multitask_loop(config, reporter).run(resume)
