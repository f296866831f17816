"""all-MiniLM-L6-v2's query-time path through ONNX Runtime.

A query and the few dozen hits a re-ranker re-scores get the same vectors from ONNX Runtime's
CPU kernels as from torch, as fast on quiet cores and far faster on busy ones, where torch's
threads wait on each other (measured in docs/benchmarks.md, "Re-ranking with a stronger
encoder"). The graph is exported once from the weights MiniLM has already loaded, into the
qtsearch cache under MiniLM's fingerprint, so nothing is downloaded and every later process
reads the same file. The pooling stays here in numpy: mean over the attention mask, then L2
normalisation, as the model's own Pooling and Normalize modules do.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.paths import cache_dir

#: The graph's inputs, as BERT's forward takes them.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_importable() -> bool:
    """Whether ONNX Runtime (to run the graph) and onnx (which torch's exporter needs) load."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def graph_path(fingerprint: str) -> Path:
    """Where the exported graph of the weights `fingerprint` names lives (OSError when the
    cache cannot be made)."""
    return cache_dir("onnx") / f"minilm-{fingerprint}.onnx"


def export(model: Any, path: Path) -> None:
    """Write the transformer of a loaded SentenceTransformer (its last hidden state, batch and
    length dynamic) to `path`, atomically: a process that finds the file finds all of it."""
    import torch

    bert = model[0].auto_model

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    example = model.tokenizer(["an example", "a longer example sentence"], padding=True,
                              return_tensors="pt")
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "hidden")}
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    # The exporter's warnings and log lines are about tracing, once per cache: not the user's.
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    try:
        quiet.setLevel(logging.ERROR)
        with (warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()),
              contextlib.redirect_stderr(io.StringIO()), torch.no_grad()):
            warnings.simplefilter("ignore")
            torch.onnx.export(LastHidden().eval(), tuple(example[k] for k in INPUTS), str(tmp),
                              input_names=list(INPUTS), output_names=["hidden"],
                              dynamic_axes=axes, opset_version=17, dynamo=False)
        os.replace(tmp, path)
    finally:
        quiet.setLevel(level)
        tmp.unlink(missing_ok=True)


class OnnxMiniLM:
    """The sentence vectors of a loaded MiniLM (`model`, a SentenceTransformer) computed by
    ONNX Runtime on `threads` threads. Raises OSError or ONNX Runtime's errors when the graph
    can neither be read nor written: the caller keeps torch then."""

    def __init__(self, model: Any, fingerprint: str, threads: int):
        import onnxruntime as ort

        path = graph_path(fingerprint)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads  # as many as torch's path uses
        options.inter_op_num_threads = 1  # one chain of operators: no parallel branches
        options.log_severity_level = 3  # errors only
        # Idle threads sleep rather than spin: on a few shared cores a spinning pool takes the
        # time the index search and other processes need (docs/benchmarks.md, "Re-ranking")
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.exported = False
        if not path.is_file():
            export(model, path)
            self.exported = True
        try:
            self.session = ort.InferenceSession(str(path), options,
                                                providers=["CPUExecutionProvider"])
        except Exception:  # a damaged file (disk full, another tool): export it again
            export(model, path)
            self.exported = True
            self.session = ort.InferenceSession(str(path), options,
                                                providers=["CPUExecutionProvider"])
        self.path = path
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length)

    def encode(self, batch: list[str]) -> np.ndarray:
        """Unit vectors [len(batch), dim] of one padded batch."""
        enc = self.tokenizer(batch, padding=True, truncation="longest_first",
                             max_length=self.max_length, return_tensors="np")
        feed = {k: enc[k].astype(np.int64) for k in INPUTS}
        hidden = self.session.run(None, feed)[0]
        mask = feed["attention_mask"][..., None].astype(np.float32)
        v = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return v.astype(np.float32, copy=False)
