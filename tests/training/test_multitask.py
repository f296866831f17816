"""GenSen-style multi-task training: the task schedule, and a real run where both tasks learn."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from qtsearch import load_encoder
from qtsearch.encoders.files import read_metrics
from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import MultitaskConfig
from qtsearch.training.loop import task_schedule
from qtsearch.training.multitask import train_multitask

REPO = Path(__file__).resolve().parents[2]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"
SNLI = "nli/ketm/data/snli/test.txt"


@pytest.fixture(scope="module")
def multitask_model(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("multitask")
    config = MultitaskConfig(
        corpus=[str(shared_data / BOOK)], split_sentences=True, train=[str(shared_data / SNLI)],
        out=str(out), hidden=32, fc_dim=64, glove_words=2000, vocab_size=3000,
        qt_batch_size=64, batch_size=64, qt_val_blocks=8, schedule="round-robin",
        max_steps=80, val_every=40, checkpoint_every=80, lr=3e-3,
    )
    train_multitask(config)
    return out


def test_round_robin_alternates_and_counts_each_tasks_batches() -> None:
    tasks, position = task_schedule(7, (100, 10), "round-robin", seed=0)
    assert tasks.tolist() == [0, 1, 0, 1, 0, 1, 0]
    assert position.tolist() == [0, 0, 1, 1, 2, 2, 3]


def test_proportional_schedule_follows_the_tasks_sizes_and_the_seed() -> None:
    tasks, position = task_schedule(20_000, (300, 100), "proportional", seed=3)
    assert abs((tasks == 1).mean() - 0.25) < 0.015
    for t in (0, 1):
        assert position[tasks == t].tolist() == list(range(int((tasks == t).sum())))
    again, _ = task_schedule(20_000, (300, 100), "proportional", seed=3)
    other, _ = task_schedule(20_000, (300, 100), "proportional", seed=4)
    assert np.array_equal(tasks, again) and not np.array_equal(tasks, other)


@pytest.mark.slow
def test_both_tasks_learn_on_a_short_real_run(multitask_model: Path) -> None:
    """Held-out losses of both tasks fall; accuracies rise above their baselines."""
    rows = read_metrics(multitask_model)
    vals = [r for r in rows if "val_accuracy" in r]
    first, last = vals[0], vals[-1]
    assert (first["step"], last["step"]) == (0, 80)
    assert last["val_loss"] < first["val_loss"] - 0.02
    assert last["qt_val_loss"] < first["qt_val_loss"] - 0.05
    assert last["val_accuracy"] > last["chance"] + 0.05
    assert last["qt_val_accuracy"] > last["qt_chance"]  # 320 rows: the loss is the signal
    trained = [r for r in rows if "task" in r]
    assert {r["task"] for r in trained} == {"qt", "nli"}
    assert sum(r["batches"] for r in trained) == 80


@pytest.mark.slow
def test_the_shared_encoder_loads_and_keeps_the_corpus_ids(multitask_model: Path) -> None:
    config = json.loads((multitask_model / "config.json").read_text())
    assert config["encoder"]["objective"] == "multitask"
    corpus_vocab = Vocab.load(multitask_model / "cache" / "corpus" / "vocab.json")
    vocab = Vocab.load(multitask_model / "vocab.json")
    assert vocab.words[: len(corpus_vocab)] == corpus_vocab.words  # QT token ids stay valid
    heads = load_file(str(multitask_model / "heads.safetensors"))
    assert any(k.startswith("qt_context.") for k in heads)
    assert any(k.startswith("nli.") for k in heads)
    enc = load_encoder(multitask_model, device="cpu")
    vecs = enc.encode(["Emma was very happy.", "a dog runs on the beach"])
    assert vecs.shape == (2, 64) and np.isfinite(vecs).all()


@pytest.mark.slow
def test_resume_continues_exactly(shared_data: Path, tmp_path: Path) -> None:
    def config(out: Path, steps: int) -> MultitaskConfig:
        return MultitaskConfig(
            corpus=[str(shared_data / BOOK)], split_sentences=True,
            train=[str(shared_data / SNLI)], out=str(out), hidden=16, fc_dim=16,
            glove_words=500, vocab_size=2000, qt_batch_size=32, batch_size=32, qt_val_blocks=2,
            max_steps=steps, val_every=5, checkpoint_every=5,
        )

    train_multitask(config(tmp_path / "whole", 10))
    train_multitask(config(tmp_path / "part", 5))
    train_multitask(config(tmp_path / "part", 10), resume=True)
    for name in ("weights.safetensors", "heads.safetensors"):
        a, b = (load_file(str(tmp_path / run / name)) for run in ("whole", "part"))
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_cli_refuses_bad_options_and_files(shared_data: Path, tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(REPO / "cli.py"), "train-multitask", *args],
                              capture_output=True, text=True, timeout=300)

    book, out = str(shared_data / BOOK), str(tmp_path / "m")
    missing = cli(book, "--nli", str(tmp_path / "none.jsonl"), "--out", out)
    assert missing.returncode == 3 and "no such file" in missing.stderr
    schedule = cli(book, "--nli", str(shared_data / SNLI), "--out", out, "--schedule", "random")
    assert schedule.returncode == 2 and "--schedule" in schedule.stderr
    assert "Traceback" not in missing.stderr + schedule.stderr
