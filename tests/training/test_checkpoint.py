"""qtsearch.training.checkpoint: a tiny model and optimiser saved and restored exactly, a
resume with other options or data refused, and the checkpoint.tmp a killed save leaves."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from torch import nn

from qtsearch.core.errors import ModelError, OutputError, UsageError
from qtsearch.training.checkpoint import (
    CHECKPOINT,
    checkpoint_dir,
    load_state,
    same_run,
    save_state,
    saved_config,
    writable_folder,
)


@dataclass
class Tiny:
    lr: float = 0.01
    hidden: int = 3
    max_steps: int = 10
    RESUMABLE: ClassVar[frozenset[str]] = frozenset({"max_steps"})


def trained(seed: int) -> tuple[nn.Linear, torch.optim.Adam]:
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(3):
        optim.zero_grad()
        model(torch.randn(5, 4)).pow(2).sum().backward()
        optim.step()
    return model, optim


def test_a_round_trip_restores_weights_optimiser_step_and_rng(tmp_path: Path) -> None:
    model, optim = trained(0)
    save_state(tmp_path, {"encoder": model}, optim, 3, Tiny(), {"sentences": 42})
    assert sorted(p.name for p in (tmp_path / CHECKPOINT).iterdir()) == [
        "state.json", "state.safetensors"]
    expected_next = torch.rand(3)  # what the saved RNG state draws next

    other, other_optim = trained(1)
    step = load_state(tmp_path, {"encoder": other}, other_optim, torch.device("cpu"),
                      Tiny(max_steps=20), {"sentences": 42})  # max_steps may change
    assert step == 3
    for a, b in zip(model.state_dict().values(), other.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    saved, loaded = optim.state_dict(), other_optim.state_dict()
    # through JSON: the same groups (a tuple such as Adam's betas comes back a list)
    assert json.dumps(loaded["param_groups"], sort_keys=True) == \
        json.dumps(saved["param_groups"], sort_keys=True)
    for i, state in saved["state"].items():
        for key, value in state.items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(loaded["state"][i][key]))
    assert torch.equal(torch.rand(3), expected_next)
    assert saved_config(tmp_path) == {"lr": 0.01, "hidden": 3, "max_steps": 10}


def test_a_resume_with_another_option_or_other_data_is_refused(tmp_path: Path) -> None:
    model, optim = trained(0)
    save_state(tmp_path, {"encoder": model}, optim, 3, Tiny(), {"sentences": 42})
    with pytest.raises(UsageError, match=r"--resume: --hidden differs from the checkpoint "
                                         r"\(3 there, 4 now\)"):
        load_state(tmp_path, {"encoder": model}, optim, torch.device("cpu"), Tiny(hidden=4),
                   {"sentences": 42})
    with pytest.raises(UsageError, match=r"the same data as the interrupted run "
                                         r"\(sentences: 42 there, 41 now\)"):
        load_state(tmp_path, {"encoder": model}, optim, torch.device("cpu"), Tiny(),
                   {"sentences": 41})


def test_same_run_takes_defaults_for_options_an_older_run_lacked() -> None:
    same_run({"lr": 0.01}, Tiny(), {}, {})  # hidden and max_steps: the defaults then
    with pytest.raises(UsageError, match="--lr differs"):
        same_run({"lr": 0.02, "unknown_later_option": 1}, Tiny(), {}, {})


def test_no_checkpoint_or_a_corrupt_one(tmp_path: Path) -> None:
    model, optim = trained(0)
    with pytest.raises(ModelError, match="no checkpoint to resume from"):
        load_state(tmp_path, {"encoder": model}, optim, torch.device("cpu"), Tiny(), {})
    assert saved_config(tmp_path) == {}
    save_state(tmp_path, {"encoder": model}, optim, 3, Tiny(), {})
    (tmp_path / CHECKPOINT / "state.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(ModelError, match="corrupt checkpoint or different model"):
        load_state(tmp_path, {"encoder": model}, optim, torch.device("cpu"), Tiny(), {})
    save_state(tmp_path, {"encoder": model}, optim, 3, Tiny(), {})
    small = nn.Linear(2, 2)  # another model's shapes
    with pytest.raises(ModelError, match="corrupt checkpoint or different model"):
        load_state(tmp_path, {"encoder": small}, torch.optim.Adam(small.parameters()),
                   torch.device("cpu"), Tiny(), {})


def test_a_save_killed_before_the_rename_is_resumed_from_checkpoint_tmp(tmp_path: Path) -> None:
    model, optim = trained(0)
    save_state(tmp_path, {"encoder": model}, optim, 7, Tiny(), {})
    assert checkpoint_dir(tmp_path) == tmp_path / CHECKPOINT
    # killed after removing the old checkpoint, before renaming the complete new one
    (tmp_path / CHECKPOINT).rename(tmp_path / (CHECKPOINT + ".tmp"))
    assert checkpoint_dir(tmp_path) == tmp_path / (CHECKPOINT + ".tmp")
    assert json.loads((checkpoint_dir(tmp_path) / "state.json").read_text())["step"] == 7
    other, other_optim = trained(1)
    assert load_state(tmp_path, {"encoder": other}, other_optim, torch.device("cpu"), Tiny(),
                      {}) == 7
    assert torch.equal(other.weight, model.weight)
    shutil.rmtree(tmp_path / (CHECKPOINT + ".tmp"))
    assert checkpoint_dir(tmp_path) == tmp_path / CHECKPOINT


def test_writable_folder_creates_it_or_fails_in_one_line(tmp_path: Path) -> None:
    writable_folder(tmp_path / "a" / "model")
    assert (tmp_path / "a" / "model").is_dir() and not any((tmp_path / "a" / "model").iterdir())
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match=r"file/model: cannot write the model folder"):
        writable_folder(tmp_path / "file" / "model")
