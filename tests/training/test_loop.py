"""The one training loop: what every trainer now shares (schedule of tasks, typed resume check,
checkpoint recovery, Ctrl-C/SIGTERM), checked on trainers that lacked it before."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qtsearch import load_encoder
from qtsearch.core.config import config_from_dict
from qtsearch.core.errors import UsageError
from qtsearch.training.configs import MultitaskConfig, NLITrainConfig, PairsTrainConfig, TrainConfig
from qtsearch.training.loop import task_schedule
from qtsearch.training.nli_trainer import train_nli
from qtsearch.training.trainer import train

REPO = Path(__file__).resolve().parents[2]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"
SNLI = "nli/ketm/data/snli/test.txt"


def test_three_tasks_share_the_steps_by_their_sizes() -> None:
    tasks, position = task_schedule(30_000, (300, 100, 200), "proportional", seed=5)
    shares = np.bincount(tasks, minlength=3) / len(tasks)
    np.testing.assert_allclose(shares, [0.5, 1 / 6, 1 / 3], atol=0.015)
    for t in range(3):
        assert position[tasks == t].tolist() == list(range(int((tasks == t).sum())))
    assert task_schedule(5, (7, 1, 1), "round-robin", 0)[0].tolist() == [0, 1, 2, 0, 1]
    assert task_schedule(4, (9,), "proportional", 0)[1].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("config", [
    TrainConfig(corpus=["a.txt"], encoder="transformer", lr=1e-3, max_steps=7),
    NLITrainConfig(train=["x.jsonl"], valid=["v.jsonl"], dropout=0.2),
    MultitaskConfig(corpus=["b"], train=["n"], pairs=["p.csv"], pairs_scale=10.0, data="d"),
    PairsTrainConfig(train=["p.csv"], hard_negatives=False),
])
def test_configs_read_back_as_their_type(config) -> None:
    """What a checkpoint stores (JSON) comes back as the same typed config."""
    saved = json.loads(json.dumps(dataclasses.asdict(config)))
    assert config_from_dict(type(config), saved) == config


def emma_config(shared: Path, out: Path, corpus: str, **kw) -> TrainConfig:
    base = dict(corpus=[corpus], out=str(out), hidden=16, word_dim=16, vocab_size=2000,
                batch_size=64, max_steps=4, split_sentences=True, checkpoint_every=2,
                val_every=2)
    return TrainConfig(**(base | kw))


def test_resume_compares_typed_options_and_the_corpus_itself(shared_data: Path,
                                                             tmp_path: Path) -> None:
    book = str(shared_data / BOOK)
    train(emma_config(shared_data, tmp_path, book, max_steps=2))
    with pytest.raises(UsageError, match=r"--hidden differs from the checkpoint \(16 there, 24"):
        train(emma_config(shared_data, tmp_path, book, hidden=24), resume=True)
    # the same file by another path: the corpus signature (resolved path) decides
    other_path = str(shared_data / "gutenberg" / "." / Path(BOOK).name)
    assert train(emma_config(shared_data, tmp_path, other_path), resume=True).steps == 4


def nli_config(shared: Path, out: Path, **kw) -> NLITrainConfig:
    base = dict(train=[str(shared / SNLI)], out=str(out), hidden=16, fc_dim=16,
                glove_words=2000, max_steps=12, val_every=6, checkpoint_every=6)
    return NLITrainConfig(**(base | kw))


def test_nli_resumes_from_a_checkpoint_killed_before_its_rename(shared_data: Path,
                                                                tmp_path: Path) -> None:
    """Killed after the old checkpoint was removed and before checkpoint.tmp was renamed:
    the complete checkpoint.tmp is taken (only the QT trainer did this before)."""
    train_nli(nli_config(shared_data, tmp_path / "whole"))
    part = tmp_path / "part"
    train_nli(nli_config(shared_data, part, max_steps=6))
    (part / "checkpoint").rename(part / "checkpoint.tmp")
    train_nli(nli_config(shared_data, part), resume=True)
    assert not (part / "checkpoint.tmp").exists()
    a, b = (load_file(str(tmp_path / r / "weights.safetensors")) for r in ("whole", "part"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_sigterm_ends_nli_training_with_a_checkpoint(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "m"
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "cli.py"), "train-nli", str(shared_data / SNLI), "--out",
         str(out), "--hidden", "16", "--fc-dim", "16", "--glove-words", "2000",
         "--max-steps", "100000", "--checkpoint-every", "100000", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metrics.jsonl").exists():
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] >= 1 and state["config"]["hidden"] == 16
    assert load_encoder(out).encode(["Still usable."]).shape == (1, 32)
    shutil.rmtree(out)


def test_a_checkpoint_of_the_old_train_loop_still_resumes(shared_data: Path,
                                                          tmp_path: Path) -> None:
    """`qtsearch train` checkpoints written before the one loop (weights as model.KEY, data
    facts inside the config record) resume into the same model as an uninterrupted run."""
    from safetensors.torch import load_file as load_torch
    from safetensors.torch import save_file

    book = str(shared_data / BOOK)
    train(emma_config(shared_data, tmp_path / "whole", book))
    part = tmp_path / "part"
    train(emma_config(shared_data, part, book, max_steps=2))
    state_path = part / "checkpoint" / "state.json"
    state = json.loads(state_path.read_text())
    state["config"] |= state.pop("data")
    state_path.write_text(json.dumps(state))
    tensors = load_torch(str(part / "checkpoint" / "state.safetensors"))
    save_file({k.replace("model.encoder.", "model.", 1): v for k, v in tensors.items()},
              str(part / "checkpoint" / "state.safetensors"))
    train(emma_config(shared_data, part, book), resume=True)
    a, b = (load_file(str(tmp_path / r / "weights.safetensors")) for r in ("whole", "part"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
