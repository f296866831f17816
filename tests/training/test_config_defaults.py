"""Every training default is written once, in qtsearch.training.configs: the commands' options
read theirs from the config dataclasses. These tests compare what each command declares with
the fields of the config it builds, so a literal written into an option, or a field changed on
one side only, fails here."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from typer.main import get_command

from qtsearch.app.cli import app
from qtsearch.app.commands.adapt import seconds
from qtsearch.encoders.kinds import PAIR_ENCODERS, QT_ENCODERS, WORD_VECTOR_DIMS
from qtsearch.training.configs import (
    AdaptConfig,
    MultitaskConfig,
    NLITrainConfig,
    PairsTrainConfig,
    TrainConfig,
)

#: Each training command and the config its options fill.
COMMANDS: dict[str, type] = {
    "train": TrainConfig,
    "train-nli": NLITrainConfig,
    "train-pairs": PairsTrainConfig,
    "train-multitask": MultitaskConfig,
    "adapt": AdaptConfig,
}
#: Parameters that fill a field of another name (commands/train_options.config_options).
RENAMED = {"out_dir": "out", "files": "train"}
#: Options of the run, not of the model: how many processes, whether to resume or print.
CLI_ONLY = {"nproc", "resume", "quiet"}
#: Options the command converts before they reach the config: the conversion.
CONVERTED: dict[tuple[str, str], Callable[[Any], Any]] = {("adapt", "teacher_budget"): seconds}


def field_default(config: type, name: str) -> Any:
    field = next(f for f in dataclasses.fields(config) if f.name == name)
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def declared(command: str) -> list[Any]:
    """The command's options whose default the user gets: required ones (--out) and the
    positional inputs have none."""
    params = get_command(app).commands[command].params  # type: ignore[attr-defined]
    return [p for p in params if p.param_type_name == "option" and not p.required
            and p.name not in CLI_ONLY]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_default_is_its_config_fields(command: str) -> None:
    config = COMMANDS[command]
    fields = {f.name for f in dataclasses.fields(config)}
    checked = []
    for param in declared(command):
        name = RENAMED.get(param.name, param.name)
        assert name in fields, (f"{command} --{param.name}: no field of {config.__name__}; map "
                                "it to one, or add it to CLI_ONLY")
        cli = CONVERTED.get((command, param.name), lambda v: v)(param.default)
        expected = field_default(config, name)
        assert cli == expected, (f"{command} --{param.name} defaults to {cli!r}, "
                                 f"{config.__name__}.{name} to {expected!r}")
        checked.append(name)
    assert len(checked) >= 15, checked  # the walk saw the options


def test_the_encoder_names_are_the_networks() -> None:
    """The torch-free names the configs check against are the ones the networks are built
    from."""
    from qtsearch.encoders.nn.folder import PAIR_MODELS
    from qtsearch.encoders.nn.quick_thoughts import ENCODERS
    from qtsearch.encoders.pretrained import WORD_VECTORS

    assert tuple(ENCODERS) == QT_ENCODERS
    assert tuple(PAIR_MODELS) == PAIR_ENCODERS
    assert {name: dim for name, (dim, _) in WORD_VECTORS.items()} == WORD_VECTOR_DIMS


def test_the_configs_load_without_the_heavy_libraries() -> None:
    """The CLI imports them to show its defaults, before any command runs."""
    code = ("import json, sys, qtsearch.training.configs; print(json.dumps([m for m in "
            "('torch', 'numpy', 'faiss') if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert json.loads(done.stdout) == []
