"""Sentences → vectors with a model folder in torch (any network a folder holds).

Sentences are tokenised, sorted by length and encoded in batches of similar length (little
padding), then put back in input order. The vector of a sentence is [f(s); g(s)].
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from qtsearch.core.device import autocast_dtype, resolve_device
from qtsearch.core.errors import ModelError
from qtsearch.encoders.base import FolderEncoder, flat_ids, l2_normalize
from qtsearch.encoders.files import PIECES

if TYPE_CHECKING:  # numba's paths are imported on first use (see the properties below)
    from qtsearch.encoders.fast.fused import SmallBatchEncoder
    from qtsearch.encoders.fast.stepped import SteppedEncoder
    from qtsearch.encoders.open_vocab import WordCounts

#: Batches up to this size go through the query path (qtsearch.encoders.fast.fused) on the CPU;
#: above it torch's batched kernels are faster.
SMALL_BATCH = 16


class Encoder(FolderEncoder):
    """A loaded model in torch: `encode(sentences)` gives a float32 matrix [n, dim]."""

    def __init__(
        self, path: str | os.PathLike | None = None, device: str = "auto", precision: str = "auto"
    ):
        from qtsearch.encoders.nn.folder import encoder_config, load_weights
        from qtsearch.encoders.nn.quick_thoughts import QuickThoughts

        super().__init__(path)
        if self.cfg.encoder == "mean" and (self.path / PIECES).is_file():
            # its words outside the table are composed by the numpy encoder alone: torch would
            # give them <unk> under the same fingerprint
            raise ModelError(f"{self.path}: a mean model with a pieces table is encoded by "
                             "MeanEncoder (load_encoder picks it), not by Encoder")
        self.model = load_weights(self.path, encoder_config(self.config))
        self.device = resolve_device(device)
        self.amp = autocast_dtype(self.device, precision)
        self.model.to(self.device)
        self.dim = self.model.dim
        #: [f(s); g(s)] of a Quick-Thoughts model: the compiled CPU paths' models, and the
        #: halves NextSent scores as f(query)·g(candidate)
        self.quick_thoughts = isinstance(self.model, QuickThoughts)

    def encode_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
        counts: WordCounts | None = None,
    ) -> np.ndarray:
        import torch

        if counts is not None:  # no composed words here: every id is the vocabulary's
            counts.add(flat_ids(ids)[0], len(self.vocab))
        small = self._small_batches if len(ids) <= SMALL_BATCH else None
        if small is not None and ids:
            out = small.embed([list(x) for x in ids])
            if progress:
                progress(len(ids))
            return l2_normalize(out) if normalize else out
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        padded = PaddedBatches(ids)
        autocast = (
            torch.autocast(self.device.type, dtype=self.amp)
            if self.amp
            else contextlib.nullcontext()
        )
        batches = ((rows, torch.from_numpy(batch).to(self.device),
                    torch.from_numpy(lengths).to(self.device))
                   for rows, batch, lengths in padded.batches(batch_size))
        with torch.inference_mode(), autocast:
            if self._large_batches is not None:
                vectors = self._large_batches.embed_all(batches)
            else:
                vectors = ((rows, self.model.embed(b, n)) for rows, b, n in batches)
            for rows, vec in vectors:
                vec = vec.float().cpu().numpy()
                out[rows] = l2_normalize(vec) if normalize else vec
                if progress:
                    progress(len(rows))
        return out

    def tokenises_alongside(self) -> bool:
        """Whether a thread may tokenise the next input while `encode_ids` runs: on a GPU,
        and on the CPU batch path, whose threads never wait for each other within a step
        (docs/benchmarks.md, "Speed"). Not through `nn.GRU` on the CPU: every timestep ends
        at an OpenMP barrier, which waits for a thread descheduled by the tokeniser."""
        return self.device.type == "cuda" or self._large_batches is not None

    def warm_up(self) -> None:
        """Get the query path ready ahead of the first query: its compiled loop loaded and
        every word's input projection computed (a table of every word's projections)."""
        if self._small_batches is not None:
            self._small_batches.warm_up()

    @cached_property
    def _large_batches(self) -> SteppedEncoder | None:
        """The CPU path for batches (qtsearch.encoders.fast.stepped), where the model has one (a
        QT model of GRUs). Imported here, like the query path: only work that embeds with such
        a model should pay for numba."""
        if self.device.type != "cpu" or not self.quick_thoughts:
            return None
        import torch

        from qtsearch.encoders.fast.stepped import SteppedEncoder

        return SteppedEncoder.for_model(self.model, self.amp or torch.float32)

    @cached_property
    def _small_batches(self) -> SmallBatchEncoder | None:
        """The query path for a few sentences, where it applies: fp32 on the CPU, a QT model
        (of GRUs). Imported here: numba is slow to import, which only query-time work
        with such a model should pay (not a one-shot search of the shipped mean model)."""
        if self.device.type != "cpu" or self.amp is not None or not self.quick_thoughts:
            return None
        from qtsearch.encoders.fast.fused import SmallBatchEncoder

        return SmallBatchEncoder.for_model(self.model)


class PaddedBatches:
    """Token-id lists cut into length-sorted batches of right-padded rows, with numpy ops on
    one flat array of every id (a Python loop per row would cost more than tokenising)."""

    def __init__(self, ids: Sequence[list[int]]):
        self.flat, self.lengths = flat_ids(ids)
        self.starts = np.cumsum(self.lengths) - self.lengths
        self.order = np.argsort(self.lengths, kind="stable")

    def batches(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(row numbers, padded ids [n, longest], lengths) per batch, shortest rows first."""
        for s in range(0, len(self.order), size):
            rows = self.order[s : s + size]
            lengths = self.lengths[rows]
            steps = np.arange(int(lengths.max()))
            real = steps[None, :] < lengths[:, None]
            at = self.starts[rows, None] + np.minimum(steps[None, :], lengths[:, None] - 1)
            yield rows, np.where(real, self.flat[at], 0), lengths


