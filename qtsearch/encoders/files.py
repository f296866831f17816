"""The files of a model folder read without torch: config, architecture, vocabulary,
fingerprint, metrics.

What a query needs of a model folder besides its weights, kept apart from
qtsearch.encoders.nn.folder (which builds the torch model) so that a search with a model that
runs in numpy (qtsearch.encoders.mean) never imports torch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtsearch.core.config import mapped_tensors, write_text_atomic
from qtsearch.core.errors import ModelError, OutputError
from qtsearch.core.paths import cache_dir
from qtsearch.text.vocab import Vocab

if TYPE_CHECKING:  # numpy is imported by `read_tensors` alone: the CLI reads configs without it
    import numpy as np

FORMAT = "qtsearch-model"
CONFIG, VOCAB, WEIGHTS, METRICS = (
    "config.json",
    "vocab.json",
    "weights.safetensors",
    "metrics.jsonl",
)
#: A mean model's open vocabulary (qtsearch.encoders.pieces), where it has one.
PIECES = "pieces.safetensors"
#: The model shipped inside the package (here, not in encoders.base, so that `qtsearch
#: --version` hashes it without importing numpy).
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "default_model"


@dataclasses.dataclass
class EncoderConfig:
    """Architecture of one model (for QT, f and g share it); saved in the model's config.json.

    Fields added after the first release have defaults that rebuild older models unchanged.
    """

    encoder: str = "uni"
    vocab_size: int = 50_002  # including <pad> and <unk>
    word_dim: int = 300
    hidden: int = 1000  # per direction; the transformer's d_model
    max_len: int = 50
    glove_dim: int = 50  # mc only
    objective: str = "qt"  # the model class: a key of folder.MODELS
    layers: int = 4  # transformer only
    heads: int = 8  # transformer only
    dropout: float = 0.1  # transformer only
    negation_scope: bool = False  # mean only: words after "not", "no"… scaled by a trained vector


def is_model_folder(path: Path) -> bool:
    return (Path(path) / CONFIG).is_file() and (Path(path) / WEIGHTS).exists()


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


def config_fields(config: dict[str, Any]) -> EncoderConfig:
    """The architecture a config.json records (unknown keys ignored, missing ones default)."""
    names = {f.name for f in dataclasses.fields(EncoderConfig)}
    enc = config.get("encoder") or {}
    return EncoderConfig(**{k: v for k, v in enc.items() if k in names})


def read_vocab(folder: Path, cfg: EncoderConfig) -> Vocab:
    """The folder's vocabulary, refused when its size is not the config's."""
    vocab = Vocab.load(Path(folder) / VOCAB)
    if len(vocab) != cfg.vocab_size:
        raise ModelError(
            f"{folder}: vocabulary has {len(vocab)} words, config says {cfg.vocab_size}"
        )
    return vocab


def weights_path(folder: Path) -> Path:
    weights = Path(folder) / WEIGHTS
    if not weights.is_file():
        raise ModelError(f"{folder}: weights file {WEIGHTS} missing")
    return weights


def fingerprint(folder: Path) -> str:
    """A short hash of what determines the vectors: architecture, vocabulary and weights, and
    the pieces table where there is one (it changes the vectors of texts with words outside
    the vocabulary; a folder without one hashes as it always did).

    Hashing the files takes longer than the rest of opening a one-shot query's model, so the
    hash is kept in the qtsearch cache under the files' identity (device, inode, size,
    modification and change times): any write to a file changes its change time, which no
    tool can set back, so a changed file is always hashed again."""
    folder = Path(folder)
    paths = [folder / VOCAB, weights_path(folder)]
    if (folder / PIECES).is_file():
        paths.append(folder / PIECES)
    encoder = json.dumps(read_config(folder).get("encoder"), sort_keys=True)
    try:
        identity = [encoder]
        for path in paths:
            st = os.stat(path)
            identity.append(f"{path.resolve()}|{st.st_dev}|{st.st_ino}|{st.st_size}|"
                            f"{st.st_mtime_ns}|{st.st_ctime_ns}")
        key = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:32]
        kept = cache_dir("fingerprints") / key
        found = kept.read_text(encoding="ascii") if kept.is_file() else ""
    except (OSError, UnicodeDecodeError):  # no cache to read or make: hash every time
        kept, found = None, ""
    if len(found) == 16 and all(c in "0123456789abcdef" for c in found):
        return found
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    h.update(encoder.encode())
    digest = h.hexdigest()[:16]
    if kept is not None:
        # a cache that cannot be written (read-only, full) only makes the next open slower
        with contextlib.suppress(OSError, OutputError):
            write_text_atomic(kept, digest)
    return digest


_warned: set[str] = set()


def read_metrics(folder: Path) -> list[dict[str, Any]]:
    path = Path(folder) / METRICS
    if not path.is_file():
        return []
    rows, bad = [], 0
    for line in path.read_bytes().splitlines():
        try:
            row = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:  # damaged bytes: said, and skipped
            bad += 1
            continue
        except json.JSONDecodeError:
            continue  # a line cut by a crash is not fatal
        if isinstance(row, dict):
            rows.append(row)
    if bad and str(path) not in _warned:  # once, though `info` reads the file thrice
        _warned.add(str(path))
        logging.getLogger("qtsearch").warning("%s: %d line%s skipped (not valid "
                                              "UTF-8)", path, bad, "s" * (bad != 1))
    return rows


def latest_validation(folder: Path) -> dict[str, Any] | None:
    vals = [r for r in read_metrics(folder) if "val_accuracy" in r]
    return vals[-1] if vals else None


#: The word table's tensor in a mean model's weights (MeanWords.words, an nn.Embedding).
TABLE = "words.weight"


def read_tensors(folder: os.PathLike, names: Sequence[str],
                 keep_half: Collection[str] = ()) -> list[np.ndarray]:
    """The named tensors as float32 (stored fp16 or fp32), read alone from the safetensors
    file (a mean model's word table: `TABLE`); those named in `keep_half` come back as stored
    when stored fp16: read-only views of the mapped file (qtsearch.core.config.mapped_tensors),
    for a caller that converts only the rows it reads (a query reads a few)."""
    import numpy as np

    weights = weights_path(folder)
    try:
        _, stored = mapped_tensors(weights, whole=True)  # the check below reads every value
    except (OSError, ValueError) as e:
        raise ModelError(f"{weights}: not a valid safetensors file ({e})") from e
    missing = [n for n in names if n not in stored]
    if missing:
        raise ModelError(f"{weights}: no {missing[0]} tensor (not a mean-of-words model "
                         "as its config describes)")
    # the rest copied, writable, as the safetensors library gives them
    out = [stored[n] if n in keep_half and stored[n].dtype == np.float16
           else np.array(stored[n], dtype=np.float32) for n in names]
    for name, t in zip(names, out, strict=True):
        if not _finite(t):  # every vector built from it would be NaN: no hit at all
            raise ModelError(f"{weights}: {name} holds values that are not finite numbers "
                             "(NaN or inf); the model is damaged or its training diverged")
    return out


def _finite(t: np.ndarray) -> bool:
    """Whether every value of `t` is finite (a value finite in fp16 stays so in fp32), checked
    a block at a time so that the check's temporary array is a block's, not the table's."""
    import numpy as np

    if t.dtype == np.float16:  # numpy's fp16 arithmetic is slow; an exponent of all ones is
        bits = t.reshape(-1).view(np.uint16)  # inf or NaN, and integer masks are fast
        step = 1 << 20
        return all(((bits[i : i + step] & 0x7C00) != 0x7C00).all()
                   for i in range(0, len(bits), step))
    if t.ndim < 2:
        return bool(np.isfinite(t).all())
    step = max(1, (1 << 20) // max(1, t[0].size))
    return all(np.isfinite(t[i : i + step]).all() for i in range(0, len(t), step))
