"""The teacher task's setup (`train-multitask --teacher`; its options are
configs.TeacherOptions): the sentences selected, their teacher vectors taken from the cache
(encoded first where missing), the task made on the shared encoder with a fresh projection head.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from qtsearch.core.errors import Interrupted
from qtsearch.core.paths import cache_dir
from qtsearch.core.progress import Reporter
from qtsearch.encoders.wheels import minilm_fingerprint
from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import TeacherOptions
from qtsearch.training.loop import Runtime, stop_signals
from qtsearch.training.objectives.teacher import TeacherTask
from qtsearch.training.teacher_cache import Encode, TeacherCache, cached_selection


@dataclass
class TeacherData:
    """The selected sentences, their cached vectors and the held-out rows."""

    sentences: list[str]
    vectors: np.ndarray  # fp16 [n, teacher dim], L2-normalised
    valid_rows: np.ndarray
    facts: dict[str, Any]


def minilm_teacher(device: str) -> Encode:
    """all-MiniLM-L6-v2's normalised vectors (loaded only when the cache lacks some)."""
    from qtsearch.encoders.baselines import MiniLM

    model = MiniLM(device, runtime="torch")  # bulk: even a short last chunk as torch encodes it
    return lambda rows: model.encode(rows, normalize=True)


def teacher_data(options: TeacherOptions, seed: int, display: Reporter,
                 teacher: Callable[[], Encode], fingerprint: str | None = None) -> TeacherData:
    """Select the sentences, fill the cache, hold out a fixed share for validation."""
    root = Path(options.teacher_cache) if options.teacher_cache else cache_dir("teacher")
    sentences = cached_selection(options.teacher, options.teacher_sentences, root)
    cache = TeacherCache(root, fingerprint or minilm_fingerprint(), sentences)
    todo = len(cache.missing())
    done = len(sentences) - sum(len(cache.rows(k)) for k in cache.missing())
    with display.stage("teacher vectors", len(sentences), completed=done) as bar:

        def advance(n: int) -> None:
            nonlocal done
            done += n
            bar.update(done, f"{done:,} sentences")

        try:
            with stop_signals():  # SIGTERM as Ctrl-C: the finished shards are kept either way
                encoded = cache.fill(teacher, advance)
        except KeyboardInterrupt:
            kept = cache.n_shards - len(cache.missing())
            raise Interrupted(f"interrupted while computing teacher vectors; {kept} of "
                              f"{cache.n_shards} shards kept in {cache.folder}; the next run "
                              "encodes only the rest") from None
    vectors = cache.load()
    # whole batches, at most a fifth of the sentences, at least one batch
    b = max(1, min(options.teacher_batch_size, len(sentences) // 2))
    n_valid = b * max(1, min(options.teacher_val_batches, len(sentences) // 5 // b))
    valid_rows = np.random.default_rng([seed, 3]).permutation(len(sentences))[:n_valid]
    display.note(f"teacher: {len(sentences):,} sentences ({len(valid_rows):,} held out), "
                 f"{encoded:,} encoded now ({todo:,} shards were missing) in {cache.folder}")
    return TeacherData(sentences, vectors, valid_rows, {
        "teacher_sentences": len(sentences), "teacher_signature": cache.signature,
        "teacher_fingerprint": cache.fingerprint, "teacher_valid": len(valid_rows)})


def teacher_task(options: TeacherOptions, data: TeacherData, vocab: Vocab, max_len: int,
                 tokens: Callable[[str], list[str]], seed: int, encoder: nn.Module,
                 runtime: Runtime) -> TeacherTask:
    """The teacher task with a fresh linear head from the encoder's width to the teacher's."""
    head = nn.Linear(encoder.dim, data.vectors.shape[1]).to(runtime.device)
    ids = [vocab.encode(tokens(s), max_len) for s in data.sentences]
    return TeacherTask(ids, data.vectors, data.valid_rows, options.teacher_batch_size, seed,
                       encoder, head, runtime)
