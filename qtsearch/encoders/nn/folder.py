"""A model is a folder: config.json, vocab.json, weights.safetensors, metrics.jsonl.

Nothing in it is executable: weights are safetensors, everything else JSON, so opening a model
someone sent you cannot run their code.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from qtsearch.core.config import with_umask, write_json_atomic
from qtsearch.core.errors import ModelError
from qtsearch.encoders.files import (
    CONFIG,
    FORMAT,
    VOCAB,
    WEIGHTS,
    config_fields,
    read_config,
    read_vocab,
    weights_path,
)
from qtsearch.encoders.nn.fastsent import FastSent
from qtsearch.encoders.nn.infersent import InferSent
from qtsearch.encoders.nn.mean_words import MeanWords
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig, QuickThoughts
from qtsearch.encoders.nn.sdae import SDAE
from qtsearch.text.vocab import Vocab

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


def save_weights(path: Path, model: nn.Module, dtype: torch.dtype = torch.float32) -> None:
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": FORMAT})
    with_umask(tmp)
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


def encoder_config(config: dict[str, Any]) -> EncoderConfig:
    cfg = config_fields(config)
    if cfg.objective not in MODELS and cfg.objective not in PAIR_OBJECTIVES:
        raise ModelError(f"unknown objective {cfg.objective!r} in model config")
    return cfg  # an unknown encoder name fails in build_model (FastSent reads none)


def load_model(folder: Path) -> tuple[nn.Module, Vocab, dict[str, Any]]:
    """Rebuild the model from its folder (fp32, eval mode), refusing anything but safetensors."""
    folder = Path(folder)
    config = read_config(folder)
    cfg = encoder_config(config)
    vocab = read_vocab(folder, cfg)
    return load_weights(folder, cfg), vocab, config


def load_weights(folder: Path, cfg: EncoderConfig) -> nn.Module:
    """The model `cfg` describes with the folder's weights (fp32, eval mode)."""
    weights = weights_path(folder)
    try:
        state = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelError(f"{weights}: not a valid safetensors file ({e})") from e
    broken = next((k for k, v in state.items() if v.is_floating_point()
                   and not bool(v.isfinite().all())), None)
    if broken is not None:
        raise ModelError(f"{weights}: {broken} holds values that are not finite numbers (NaN or "
                         "inf); the model is damaged or its training diverged")
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
    return model
