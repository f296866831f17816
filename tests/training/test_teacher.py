"""The teacher task: its loss against a brute-force computation, the teacher-vector cache
(written, resumed after a kill, reused without the teacher), Wikipedia markup kept out of the
selected sentences, and a real multi-task run in which the teacher task learns and resumes
exactly."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from qtsearch.encoders.baselines import MiniLM
from qtsearch.encoders.files import read_metrics
from qtsearch.training.configs import MultitaskConfig
from qtsearch.training.multitask import train_multitask
from qtsearch.training.objectives.teacher import teacher_loss
from qtsearch.training.teacher_cache import TeacherCache, cached_selection, select_sentences

BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"
WIKI = "wikipedia/AA/wiki_00.gz"
SNLI = "nli/ketm/data/snli/test.txt"


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    torch.set_num_threads(1)
    return MiniLM("cpu")


@pytest.fixture(scope="module")
def sentences(shared_data: Path) -> list[str]:
    return select_sentences([shared_data / BOOK, shared_data / WIKI], 300)


class Counting:
    """A teacher factory that counts the models made and the sentences encoded, and can
    stop (as a kill would) after `stop_after` encode calls."""

    def __init__(self, model: MiniLM, stop_after: int | None = None):
        self.model, self.stop_after = model, stop_after
        self.made = self.calls = self.sentences = 0

    def __call__(self) -> Callable[[list[str]], np.ndarray]:
        self.made += 1

        def encode(rows: list[str]) -> np.ndarray:
            if self.stop_after is not None and self.calls == self.stop_after:
                raise KeyboardInterrupt
            self.calls += 1
            self.sentences += len(rows)
            return self.model.encode(rows, normalize=True)

        return encode


def test_teacher_loss_matches_a_brute_force_computation() -> None:
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g)
    teacher[3] = student[3] + 0.1 * teacher[3]  # one near match
    st = teacher_loss(student, teacher)
    s, t = student.double().numpy(), teacher.double().numpy()
    total, hits = 0.0, 0
    for i in range(7):
        si, ti = s[i] / np.sqrt((s[i] ** 2).sum()), t[i] / np.sqrt((t[i] ** 2).sum())
        total += sum((si[d] - ti[d]) ** 2 for d in range(5))
        cosines = [float(s[i] @ t[j]) / np.linalg.norm(s[i]) / np.linalg.norm(t[j])
                   for j in range(7)]
        hits += int(np.argmax(cosines) == i)
    assert float(st.loss) == pytest.approx(total / 7, rel=1e-5)
    assert (st.correct, st.rows, st.chance) == (hits, 7, 1.0)
    student.requires_grad_(True)  # the loop needs a graph-connected loss
    assert teacher_loss(student, teacher).loss.requires_grad


def test_selection_spreads_over_files_and_drops_wikipedia_markup(
        shared_data: Path, sentences: list[str], tmp_path: Path) -> None:
    assert len(sentences) == 300 and len(set(sentences)) == 300
    wiki = set(select_sentences([shared_data / WIKI], 150))
    assert sum(s in wiki for s in sentences) >= 140  # half from each file
    assert not any("<doc" in s or "</doc>" in s for s in sentences)
    assert "Anarchism" not in sentences  # the title line after <doc …>
    files = [shared_data / BOOK, shared_data / WIKI]
    assert select_sentences(files, 300) == sentences  # a fixed function of the files
    assert cached_selection(files, 300, tmp_path) == sentences
    kept = list((tmp_path / "selections").iterdir())
    assert len(kept) == 1 and json.loads(kept[0].read_text()) == sentences
    assert cached_selection(files, 300, tmp_path) == sentences  # read back
    assert len(cached_selection(files, 200, tmp_path)) == 200  # another count, its own entry
    assert len(list((tmp_path / "selections").iterdir())) == 2


def test_cache_is_written_resumed_after_a_kill_and_reused(tmp_path: Path, minilm: MiniLM,
                                                          sentences: list[str]) -> None:
    killed = Counting(minilm, stop_after=2)
    cache = TeacherCache(tmp_path, "fp-a", sentences, shard_rows=100)
    with pytest.raises(KeyboardInterrupt):
        cache.fill(killed)
    assert cache.missing() == [2] and killed.sentences == 200
    assert json.loads((cache.folder / "manifest.json").read_text())["finished_shards"] == [0, 1]
    assert not list(cache.folder.glob("*.tmp*"))  # nothing half-written

    resumed = Counting(minilm)
    again = TeacherCache(tmp_path, "fp-a", sentences, shard_rows=100)
    assert again.fill(resumed) == 100 and resumed.sentences == 100  # only the missing shard
    manifest = again.manifest()
    assert manifest["complete"] and manifest["sentences"] == 300 and manifest["dim"] == 384
    vectors = again.load()
    assert vectors.dtype == np.float16 and vectors.shape == (300, 384)
    rows = [0, 99, 100, 150, 299]  # row i is sentence i, in every shard
    direct = minilm.encode([sentences[i] for i in rows], normalize=True)
    assert np.abs(vectors[rows].astype(np.float32) - direct).max() < 2e-3

    reused = Counting(minilm)
    third = TeacherCache(tmp_path, "fp-a", sentences, shard_rows=100)
    assert third.fill(reused) == 0 and (reused.made, reused.sentences) == (0, 0)
    assert np.array_equal(third.load(), vectors)
    # another teacher or another selection never meets these vectors
    assert TeacherCache(tmp_path, "fp-b", sentences, shard_rows=100).missing() == [0, 1, 2]
    assert TeacherCache(tmp_path, "fp-a", sentences[1:], shard_rows=100).missing() == [0, 1, 2]


def run_config(shared_data: Path, out: Path, cache: Path, steps: int, **kw) -> MultitaskConfig:
    return MultitaskConfig(
        corpus=[str(shared_data / BOOK)], split_sentences=True, train=[str(shared_data / SNLI)],
        teacher=[str(shared_data / BOOK), str(shared_data / WIKI)], teacher_sentences=1200,
        teacher_cache=str(cache), out=str(out), glove_words=2000, vocab_size=3000,
        qt_batch_size=64, batch_size=64, teacher_batch_size=64, qt_val_blocks=4,
        teacher_val_batches=4, schedule="round-robin", max_steps=steps, **kw)


@pytest.mark.slow
def test_a_short_multitask_run_learns_the_teacher_task_and_resumes_exactly(
        shared_data: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    cache = tmp_path / "teacher-cache"
    small = {"hidden": 32, "fc_dim": 32, "lr": 3e-3}
    train_multitask(run_config(shared_data, tmp_path / "long", cache, 300, val_every=150,
                               checkpoint_every=300, **small))
    vals = [r for r in read_metrics(tmp_path / "long") if "teacher_val_accuracy" in r]
    first, last = vals[0], vals[-1]
    assert (first["step"], last["step"]) == (0, 300)  # 100 teacher steps (round-robin)
    assert last["teacher_val_loss"] < first["teacher_val_loss"] - 0.3
    assert last["teacher_val_accuracy"] > first["teacher_val_accuracy"] + 0.1
    assert last["teacher_chance"] == pytest.approx(1 / 64)
    assert last["teacher_val_accuracy"] > 3 * last["teacher_chance"]
    config = json.loads((tmp_path / "long" / "config.json").read_text())["train"]
    assert config["teacher_sentences"] == 1200 and config["teacher_valid"] == 3 * 64
    assert "teacher.weight" in load_file(str(tmp_path / "long" / "heads.safetensors"))

    # exact resume, the cache now complete (no teacher loaded: its shards are all there)
    tiny = {"hidden": 16, "fc_dim": 16, "val_every": 4, "checkpoint_every": 4}
    train_multitask(run_config(shared_data, tmp_path / "whole", cache, 8, **tiny))
    train_multitask(run_config(shared_data, tmp_path / "part", cache, 4, **tiny))
    train_multitask(run_config(shared_data, tmp_path / "part", cache, 8, **tiny), resume=True)
    for name in ("weights.safetensors", "heads.safetensors"):
        a, b = (load_file(str(tmp_path / run / name)) for run in ("whole", "part"))
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
