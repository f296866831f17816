"""The one checkpoint format of every training run, and the check that a resume is the same run.

OUT/checkpoint/ holds state.safetensors (every module's weights as `model.NAME.KEY`, the
optimiser's tensors as `opt.I.KEY`, the torch RNG) and state.json (step, optimiser param
groups, the run's typed config and its data facts). It is written to checkpoint.tmp and renamed
as a whole; a process killed between removing the old checkpoint and the rename leaves a
complete checkpoint.tmp, which resume takes. Safetensors and JSON only: never pickle.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from qtsearch.core.config import config_from_dict, with_umask, write_json_atomic
from qtsearch.core.errors import ModelError, OutputError, UsageError

CHECKPOINT = "checkpoint"
#: Task heads (the NLI classifier, a QT context encoder) live beside the encoder's weights:
#: `load_encoder` never reads them, `--resume` and further training do.
HEADS = "heads.safetensors"


def writable_folder(out: Path) -> None:
    """Create the model folder, or fail with one line before any work is done."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / f".write-test-{os.getpid()}"  # one per process of a torchrun job
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise OutputError(f"{out}: cannot write the model folder ({e.strerror})") from e


def save_heads(folder: Path, heads: dict[str, nn.Module]) -> None:
    tensors = {f"{name}.{k}": v.detach().cpu().contiguous()
               for name, mod in heads.items() for k, v in mod.state_dict().items()}
    tmp = folder / (HEADS + ".tmp")
    save_file(tensors, str(tmp))
    with_umask(tmp)
    tmp.replace(folder / HEADS)


def save_state(folder: Path, modules: dict[str, nn.Module], optim: torch.optim.Optimizer,
               step: int, config: Any, facts: dict[str, Any]) -> None:
    """Write a resumable checkpoint of `modules` and `optim` at `step`."""
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
    with_umask(tmp / "state.safetensors")
    write_json_atomic(tmp / "state.json", {
        "step": step, "param_groups": opt["param_groups"],
        "config": dataclasses.asdict(config), "data": facts})
    shutil.rmtree(ckpt, ignore_errors=True)
    tmp.rename(ckpt)


def same_run(saved: dict[str, Any], config: Any, saved_facts: dict[str, Any],
             facts: dict[str, Any]) -> None:
    """Refuse a resume whose options or data differ from the checkpoint's. The saved config is
    read back as the config's own type (an option it lacks takes its default, as the older run
    did); options the config lists in `RESUMABLE` (where to stop, the device...) may change."""
    old = config_from_dict(type(config), saved)
    for f in dataclasses.fields(config):
        before, now = getattr(old, f.name), getattr(config, f.name)
        if f.name not in config.RESUMABLE and before != now:
            raise UsageError(f"--resume: --{f.name.replace('_', '-')} differs from the "
                             f"checkpoint ({before} there, {now} now)")
    for key, now in facts.items():
        if saved_facts.get(key) != now:
            raise UsageError(f"--resume needs the same data as the interrupted run ({key}: "
                             f"{saved_facts.get(key)} there, {now} now)")


def checkpoint_dir(folder: Path) -> Path:
    """The checkpoint to resume from: checkpoint.tmp when a process was killed between
    removing the old one and the rename."""
    ckpt = folder / CHECKPOINT
    if not (ckpt / "state.json").is_file() and (folder / (CHECKPOINT + ".tmp")).is_dir():
        return folder / (CHECKPOINT + ".tmp")
    return ckpt


def saved_config(folder: Path) -> dict[str, Any]:
    """The options of the checkpoint in `folder` ({} when there is none to read: `load_state`
    then says why)."""
    try:
        return json.loads((checkpoint_dir(folder) / "state.json").read_text(encoding="utf-8"))[
            "config"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def load_state(folder: Path, modules: dict[str, nn.Module], optim: torch.optim.Optimizer,
               device: torch.device, config: Any, facts: dict[str, Any]) -> int:
    """Restore a `save_state` checkpoint into `modules` and `optim` and return its step; the
    options and data are vetted first, so a changed option is named as such."""
    ckpt = checkpoint_dir(folder)
    try:
        state = json.loads((ckpt / "state.json").read_text(encoding="utf-8"))
        step = int(state["step"])
        # checkpoints from before the one loop kept the data facts in the config record
        same_run(state["config"], config, state.get("data", state["config"]), facts)
        tensors = load_file(str(ckpt / "state.safetensors"))
        for name, mod in modules.items():
            prefix = f"model.{name}."
            if name == "encoder" and not any(k.startswith(prefix) for k in tensors):
                prefix = "model."  # `qtsearch train`'s checkpoints from before the one loop
            mod.load_state_dict({k[len(prefix):]: v for k, v in tensors.items()
                                 if k.startswith(prefix)})
    except FileNotFoundError as e:
        raise ModelError(f"{folder}: no checkpoint to resume from (the run stopped before its "
                         "first one; run again without --resume)") from e
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, SafetensorError) as e:
        why = " ".join(str(e).split())[:200]
        raise ModelError(f"{ckpt}: corrupt checkpoint or different model ({why})") from e
    opt_state: dict[int, dict[str, torch.Tensor]] = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, i, name = k.split(".", 2)
            opt_state.setdefault(int(i), {})[name] = v.to(device) if v.dim() else v
    optim.load_state_dict({"state": opt_state, "param_groups": state["param_groups"]})
    torch.set_rng_state(tensors["rng.torch"])
    return step
