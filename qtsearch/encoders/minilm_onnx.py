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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.config import with_umask
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


def graph_path(fingerprint: str, int8: bool = False) -> Path:
    """Where the exported graph of the weights `fingerprint` names lives, or its int8 copy
    (OSError when the cache cannot be made)."""
    return cache_dir("onnx") / f"minilm-{fingerprint}{'-int8' if int8 else ''}.onnx"


@contextlib.contextmanager
def _written(path: Path) -> Iterator[Path]:
    """A temporary file beside `path`, renamed to it when the block ends without error (a
    process that finds the file finds all of it), removed otherwise."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with_umask(tmp)  # mkstemp's 0600 would keep the cache from another user
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


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
    with _written(path) as tmp, _quiet("torch.onnx"), torch.no_grad():
        torch.onnx.export(LastHidden().eval(), tuple(example[k] for k in INPUTS), str(tmp),
                          input_names=list(INPUTS), output_names=["hidden"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)


def quantize(source: Path, path: Path) -> None:
    """Write the graph at `source` to `path` with its matrix products' weights in int8, one
    scale per output column, and their inputs quantized as they come (ONNX Runtime's dynamic
    quantisation), atomically. Only the products: the embeddings and normalisations stay
    float, which keeps the vectors closest to the float graph's."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _written(path) as tmp, _quiet("root"):
        quantize_dynamic(str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"])


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """No warnings, log lines (of `logger` under ERROR) or prints: the exporter's and the
    quantiser's are about tracing and pre-processing, once per cache, not the user's."""
    quiet = logging.getLogger(None if logger == "root" else logger)
    level = quiet.level
    try:
        quiet.setLevel(logging.ERROR)
        with (warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()),
              contextlib.redirect_stderr(io.StringIO())):
            warnings.simplefilter("ignore")
            yield
    finally:
        quiet.setLevel(level)


class OnnxMiniLM:
    """The sentence vectors of a loaded MiniLM (`model`, a SentenceTransformer) computed by
    ONNX Runtime on `threads` threads; `int8`: by the graph's int8 copy (`quantize`), made from
    it once. Raises OSError or ONNX Runtime's errors when the graph can neither be read nor
    written: the caller keeps torch then."""

    def __init__(self, model: Any, fingerprint: str, threads: int, int8: bool = False):
        import onnxruntime as ort

        path = graph_path(fingerprint, int8)
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
            self._make(model, fingerprint, int8, again=False)
        try:
            self.session = ort.InferenceSession(str(path), options,
                                                providers=["CPUExecutionProvider"])
        except Exception:  # a damaged file (disk full, another tool): made again
            self._make(model, fingerprint, int8, again=True)
            self.session = ort.InferenceSession(str(path), options,
                                                providers=["CPUExecutionProvider"])
        self.path = path
        self.tokenizer = model.tokenizer
        self.max_length = int(model.max_seq_length)

    def _make(self, model: Any, fingerprint: str, int8: bool, again: bool) -> None:
        """Export the graph (`again`: even where a file is, which may be the damaged one) and,
        for `int8`, quantize it."""
        source = graph_path(fingerprint)
        if again or not source.is_file():
            export(model, source)
        if int8:
            quantize(source, graph_path(fingerprint, int8=True))
        self.exported = True

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
