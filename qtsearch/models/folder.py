"""A model is a folder: config.json, vocab.json, weights.safetensors, metrics.jsonl.

Nothing in it is executable: weights are safetensors, everything else JSON, so opening a model
someone sent you cannot run their code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from qtsearch.config import write_json_atomic
from qtsearch.errors import ModelError
from qtsearch.models.encoders import EncoderConfig, QuickThoughts
from qtsearch.models.fastsent import FastSent
from qtsearch.models.infersent import InferSent
from qtsearch.models.mean import MeanWords
from qtsearch.models.sdae import SDAE
from qtsearch.text.vocab import Vocab

FORMAT = "qtsearch-model"
CONFIG, VOCAB, WEIGHTS, METRICS = (
    "config.json",
    "vocab.json",
    "weights.safetensors",
    "metrics.jsonl",
)


# EncoderConfig.objective → the model class. A model class is built from an EncoderConfig and
# has `cfg`, `dim` and `embed(ids, lengths) → [B, dim]` (what encoding needs); trained by the QT
# trainer it also has `objective(ids, lengths, docs, opts, rng) → BatchStats`, `metric`, `baseline`.
MODELS: dict[str, type[nn.Module]] = {"qt": QuickThoughts, "fastsent": FastSent, "sdae": SDAE}
#: The trainers of sentence pairs (NLI, paraphrases, multi-task) train either encoder, named by
#: EncoderConfig.encoder.
PAIR_MODELS: dict[str, type[nn.Module]] = {"infersent": InferSent, "mean": MeanWords}
PAIR_OBJECTIVES = ("nli", "multitask", "pairs")


def build_model(cfg: EncoderConfig) -> nn.Module:
    if cfg.objective in PAIR_OBJECTIVES:
        return PAIR_MODELS.get(cfg.encoder, InferSent)(cfg)  # InferSent says what is wrong
    return MODELS[cfg.objective](cfg)


def is_model_folder(path: Path) -> bool:
    return (Path(path) / CONFIG).is_file() and (Path(path) / WEIGHTS).exists()


def save_weights(path: Path, model: nn.Module, dtype: torch.dtype = torch.float32) -> None:
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": FORMAT})
    os.replace(tmp, path)


def save_model(
    folder: Path,
    model: nn.Module,
    vocab: Vocab,
    train_config: dict[str, Any] | None = None,
    dtype: torch.dtype = torch.float32,
) -> None:
    """Write (or refresh) a model folder; each file is replaced atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab_tmp = folder / (VOCAB + ".tmp")
    vocab.save(vocab_tmp)
    os.replace(vocab_tmp, folder / VOCAB)
    save_weights(folder / WEIGHTS, model, dtype)
    config = {"format": FORMAT, "version": 1, "encoder": dataclasses.asdict(model.cfg)}
    config["train"] = train_config
    write_json_atomic(folder / CONFIG, config)


def read_config(folder: Path) -> dict[str, Any]:
    path = Path(folder) / CONFIG
    if Path(folder).exists() and not Path(folder).is_dir():
        raise ModelError(f"{folder}: is a file, not a model folder (a model is a folder holding "
                         f"{CONFIG}, {VOCAB} and {WEIGHTS})")
    if not Path(folder).is_dir():
        raise ModelError(f"{folder}: no such model folder")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise ModelError(f"{folder}: not a model folder (no {CONFIG})") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: corrupt model config ({e})") from e
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ModelError(f"{path}: not a qtsearch model config")
    return config


def encoder_config(config: dict[str, Any]) -> EncoderConfig:
    names = {f.name for f in dataclasses.fields(EncoderConfig)}
    enc = config.get("encoder") or {}
    cfg = EncoderConfig(**{k: v for k, v in enc.items() if k in names})
    if cfg.objective not in MODELS and cfg.objective not in PAIR_OBJECTIVES:
        raise ModelError(f"unknown objective {cfg.objective!r} in model config")
    return cfg  # an unknown encoder name fails in build_model (FastSent reads none)


def load_model(folder: Path) -> tuple[nn.Module, Vocab, dict[str, Any]]:
    """Rebuild the model from its folder (fp32, eval mode), refusing anything but safetensors."""
    folder = Path(folder)
    config = read_config(folder)
    cfg = encoder_config(config)
    vocab = Vocab.load(folder / VOCAB)
    if len(vocab) != cfg.vocab_size:
        raise ModelError(
            f"{folder}: vocabulary has {len(vocab)} words, config says {cfg.vocab_size}"
        )
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise ModelError(f"{folder}: weights file {WEIGHTS} missing")
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelError(f"{weights}: not a valid safetensors file ({e})") from e
    try:
        model = build_model(cfg)
    except (ValueError, TypeError, RuntimeError, AssertionError) as e:  # e.g. heads ∤ hidden
        raise ModelError(f"{folder}: the config describes no valid model ({e})") from e
    try:
        model.load_state_dict({k: v.float() for k, v in state.items()})
    except RuntimeError as e:
        why = " ".join(str(e).split())[:200]
        raise ModelError(f"{weights}: weights do not match the config ({why})") from e
    model.eval()
    return model, vocab, config


def fingerprint(folder: Path) -> str:
    """A short hash of what determines the vectors: architecture, vocabulary and weights."""
    h = hashlib.sha256()
    for name in (VOCAB, WEIGHTS):
        with open(Path(folder) / name, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    h.update(json.dumps(read_config(folder).get("encoder"), sort_keys=True).encode())
    return h.hexdigest()[:16]


def read_metrics(folder: Path) -> list[dict[str, Any]]:
    path = Path(folder) / METRICS
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut by a crash is not fatal
    return rows


def latest_validation(folder: Path) -> dict[str, Any] | None:
    vals = [r for r in read_metrics(folder) if "val_accuracy" in r]
    return vals[-1] if vals else None
