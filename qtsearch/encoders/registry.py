"""The one factory of encoders: a model folder (the shipped one by default) or a name (a baseline,
an untrained copy of a model), each behind the `SentenceEncoder` protocol."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from qtsearch.core.device import check_device, cuda_available
from qtsearch.core.errors import ModelError
from qtsearch.core.paths import cache_dir
from qtsearch.encoders.base import SentenceEncoder, default_model_path
from qtsearch.encoders.baselines import GloveBow, MiniLM
from qtsearch.encoders.files import PIECES, config_fields, fingerprint, read_config
from qtsearch.encoders.mean import MeanEncoder
from qtsearch.encoders.neural import Encoder
from qtsearch.encoders.static import Model2Vec

#: Encoders loaded by name (`load_external`): `name`, `dim`, `fingerprint`, `path` (the name),
#: `device`, `encode`, `known_words`, `warm_up` like `Encoder`, but no token ids.
ExternalEncoder: TypeAlias = MiniLM | Model2Vec | GloveBow

#: Names `resolve_encoders` understands besides model folder paths.
BASELINE_NAMES = ("glove", "minilm", "model2vec", "random", "random:<model folder>", "default")
#: Encoders from the optional extra `[encoders]`: skipped, not fatal, among baselines.
OPTIONAL = ("minilm", "model2vec")


#: Encoders `load_encoder` takes by name instead of a model folder (the optional extra
#: `[encoders]` provides minilm and model2vec; glove ships with qtsearch).
EXTERNAL_ENCODERS = ("minilm", "model2vec", "glove")


def load_encoder(
    path: str | os.PathLike | None = None, device: str = "auto", precision: str = "auto",
    order_only: bool = False,
) -> Encoder | MeanEncoder | ExternalEncoder:
    """Load a model folder (None: the shipped default model), or an encoder by name
    (EXTERNAL_ENCODERS: all-MiniLM-L6-v2, model2vec distilled from it, mean GloVe), which has
    the same interface as `Encoder` for indexing and search but no token-id fast path.

    A mean-of-words model on the CPU is encoded in numpy (`MeanEncoder`: the same vectors
    within 1e-6, faster than torch on batches, and torch is never imported); `device` "cpu"
    decides that without torch, "auto" asks `cuda_available` whether a GPU is there. A mean
    model with a pieces table (an open vocabulary, qtsearch.encoders.pieces) is `MeanEncoder`
    on every device: its composed words are rows that only the numpy table has.

    `order_only`: the vectors are only compared with one another (a re-ranker's), so an
    encoder may compute them faster at a lower precision (MiniLM: `int8`)."""
    if isinstance(path, str) and path in EXTERNAL_ENCODERS:
        return load_external(path, device, order_only)
    folder = Path(path) if path is not None else default_model_path()
    check_device(device)
    if config_fields(read_config(folder)).encoder == "mean" and (
            device == "cpu" or (folder / PIECES).is_file()
            or (device == "auto" and not cuda_available())):
        return MeanEncoder(folder)
    return Encoder(folder, device=device, precision=precision)


def load_external(name: str, device: str = "auto", order_only: bool = False) -> ExternalEncoder:
    """One of EXTERNAL_ENCODERS by name (`order_only`: as `load_encoder`); a ModelError names
    the extra to install if absent."""
    if name == "minilm":
        return MiniLM(device=device, int8=order_only)
    if name == "model2vec":
        return Model2Vec(device=device)
    if name == "glove":
        return GloveBow()
    raise ModelError(f"unknown encoder {name!r}; choose from {', '.join(EXTERNAL_ENCODERS)} "
                     "or give a model folder")


def random_like(model_path: str | os.PathLike | None, seed: int = 0, device: str = "auto"):
    """An untrained model with the architecture and vocabulary of `model_path` (None: default):
    any kind a model folder holds (QT, FastSent, SDAE, InferSent…).

    The random weights (drawn with `seed`, as training would draw them; MC-QT and InferSent
    keep their frozen GloVe table) are written once as a real model folder in the cache and
    loaded like any model, so they encode through the same code path and get their own
    fingerprint.
    """
    import torch

    from qtsearch.encoders.nn.folder import build_model, encoder_config, load_model, save_model
    from qtsearch.encoders.pretrained import glove_matrix

    source = Path(model_path) if model_path is not None else default_model_path()
    read_config(source)  # a clear ModelError when it is not a model folder
    folder = cache_dir("random-models", f"{fingerprint(source)}-seed{seed}")
    if not (folder / "weights.safetensors").is_file():
        _, vocab, config = load_model(source)
        torch.manual_seed(seed)
        cfg = encoder_config(config)
        model = build_model(cfg)
        if cfg.encoder in ("mc", "infersent"):  # the models that read frozen GloVe vectors
            model.set_frozen_vectors(torch.from_numpy(glove_matrix(vocab.words)[0]))
        save_model(folder, model, vocab, {"random_init_of": str(source), "seed": seed})
    label = f"random:{source.name if model_path is not None else 'default'}"

    class RandomEncoder(Encoder):
        @property
        def name(self) -> str:
            return label

    return RandomEncoder(folder, device=device)


def resolve_encoder(spec: str, device: str = "auto") -> SentenceEncoder:
    """One encoder from a name: "glove", "minilm", "model2vec", "random[:<model folder>]",
    "default", or a model folder path. Raises ModelError when it cannot be loaded."""
    if spec in EXTERNAL_ENCODERS:
        return load_external(spec, device)
    if spec == "random" or spec.startswith("random:"):
        rest = spec.partition(":")[2]
        return random_like(rest or None, device=device)
    if spec == "default":
        return load_encoder(None, device=device)
    if not Path(spec).exists():
        raise ModelError(
            f"{spec}: no such model folder (or use one of: {', '.join(BASELINE_NAMES)})"
        )
    return load_encoder(spec, device=device)


def resolve_encoders(
    specs: Sequence[str], device: str = "auto"
) -> tuple[list[SentenceEncoder], list[str]]:
    """Encoders for `specs` in order, plus one message per optional baseline that was skipped
    (only "minilm" and "model2vec" are optional: their packages may be absent). Any other
    failure raises."""
    encoders: list[SentenceEncoder] = []
    skipped: list[str] = []
    for spec in specs:
        try:
            encoders.append(resolve_encoder(spec, device))
        except ModelError as e:
            if spec not in OPTIONAL:
                raise
            skipped.append(str(e))
    return encoders, skipped
