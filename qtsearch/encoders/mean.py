"""A mean-of-words model (qtsearch.encoders.nn.mean_words, the shipped default) encoded in numpy.

Its vector is a table lookup and a mean, which needs no torch: a one-shot `qtsearch search`
with it starts without importing torch (~2.4 s of a ~3.6 s start on 2 cores). A few sentences
(a query) are a gather and `add.reduceat`; many (a build) are one sparse product, rows of
1/length weights times the table, which on 100k Gutenberg sentences of the shipped 256-d
model took 0.20 s (median of 3) against torch's embedding bag's 0.34 s and the gather's 1.1 s
(scipy.sparse costs ~0.3 s to import, so queries skip it). The vectors are torch's within 1e-6
(the same fp32 table, summed in another order), and the fingerprint is the folder's, so
indexes built with either open with the other. A model with `negation_scope` scales the rows
of words in a negation's scope by its trained vector and leaves out the cues (the sparse path:
a second product over the scoped words alone).

The table stays in memory as stored (fp16 for the shipped model: half the memory of a float32
copy): a query converts only the rows it gathers, each once for the process's life
(`open_vocab.Float32Rows.take`), and the whole table is converted once, when first needed
(`table`: a build's sparse products, a fit). A row converts to the same float32 values either
way, so the vectors are the same.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np

from qtsearch.core.device import Cpu, cpus
from qtsearch.core.errors import ModelError
from qtsearch.encoders.base import LEAD_TOKENS, TAIL_WEIGHT, FolderEncoder, flat_ids, l2_normalize
from qtsearch.encoders.files import TABLE, read_tensors
from qtsearch.encoders.open_vocab import Float32Rows, OpenVocab, WordCounts
from qtsearch.encoders.pieces import LazyPieces
from qtsearch.text.negation import CUE, in_scope

#: With negation_scope: the scale of words in a negation's scope, and each word's role.
NEGATED, ROLES = "negated", "roles"
#: Sentences per gather: their rows (~20 tokens x 1 KB) stay in cache; blocks of 1024 were
#: 1.8x slower than 128 on 100k sentences.
BLOCK = 128
#: From this many sentences a call goes through one sparse product per chunk of CHUNK.
SPARSE_FROM = 256
CHUNK = 16_384


class MeanEncoder(FolderEncoder):
    """A mean-of-words model folder on the CPU: `encode(sentences)` gives a float32 matrix."""

    #: a build reports its tokens composed and unknown: counting them costs nothing beside the
    #: gather of their rows
    counts_words = True
    #: its encoding is a sparse sum, light beside tokenising: a CPU build tokenises on every
    #: core
    light = True
    #: a sentence's vector is the mean of its own rows, whatever the batch
    rowwise = True

    def __init__(self, path: str | os.PathLike | None = None):
        super().__init__(path)
        if self.cfg.encoder != "mean":
            raise ModelError(f"{self.path}: not a mean-of-words model "
                             f"(encoder {self.cfg.encoder!r})")
        self.device = Cpu()
        names = (TABLE, NEGATED, ROLES) if self.cfg.negation_scope else (TABLE,)
        rows, *scope = read_tensors(self.path, names, keep_half=(TABLE,))
        if rows.ndim != 2 or rows.shape[0] != len(self.vocab):
            raise ModelError(f"{self.path}: {TABLE} is not a matrix of {len(self.vocab)} rows, "
                             "one per word")
        #: the word table as stored (fp16 or float32): what a query's rows are gathered from
        self.rows = rows
        self._whole = Float32Rows(rows)  # shared with the open vocabulary: one conversion
        self.dim = int(rows.shape[1])
        #: (scale, roles) of negation scopes, or None
        self.scope = tuple(scope) if scope else None
        if self.scope and (self.scope[0].shape != (self.dim,)
                           or self.scope[1].shape != (len(self.vocab),)):
            raise ModelError(f"{self.path}: {NEGATED} or {ROLES} has the wrong shape")
        #: the open vocabulary (qtsearch.encoders.pieces) where the folder has a pieces table:
        #: a word outside the table gets a row composed from its word pieces
        self.pieces = LazyPieces.load(self.path)
        self.open_vocab: OpenVocab | None = None
        if self.pieces is not None:
            if self.pieces.dim != self.dim:
                raise ModelError(f"{self.path}: its pieces table is {self.pieces.dim}-d, its "
                                 f"words {self.dim}-d")
            self.vocab = self.open_vocab = OpenVocab(self.vocab, self.pieces, rows,
                                                     whole=self._whole)

    @functools.cached_property
    def table(self) -> np.ndarray:
        """The word table as float32, converted from the stored rows when first asked for."""
        return self._whole()

    def word_rows(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The words of `texts` (composed and corpus words included) as float32 rows, each
        distinct word once, then which row each token is, text after text, and each text's
        number of tokens: what word alignment compares (qtsearch.search.alignment). One gather
        for all the texts, of distinct words only (30 hits' 630 tokens are ~250 words)."""
        return self.id_rows([self.token_ids(t) for t in texts])

    def id_rows(self, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`word_rows` of texts already tokenised (`token_ids` of each, lists or arrays)."""
        flat, lengths = flat_ids(ids)
        words, positions = np.unique(flat, return_inverse=True)
        return self._rows(words), positions.reshape(-1), lengths

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        """The float32 rows of `ids`, composed words included (a new array; read after the
        ids were made, the open vocabulary's table holds every id they can name)."""
        table = self.open_vocab.table if self.open_vocab is not None else None
        return table.take(ids) if table is not None else self._whole.take(ids)

    def encode_ids(
        self,
        ids: Sequence[list[int]],
        batch_size: int = 512,
        normalize: bool = False,
        progress: Callable[[int], None] | None = None,
        counts: WordCounts | None = None,
    ) -> np.ndarray:
        """Mean of each sentence's rows (a sentence has at least one id: <unk> when empty);
        `progress(n)` after each block of sentences; the tokens are added to `counts` where
        given. Many sentences are cut into one chunk per core or more, each one sparse
        product on a thread of its own (scipy's product releases the GIL)."""
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        sparse = len(ids) >= SPARSE_FROM
        whole = None
        threads = 1
        if sparse:
            # every row so far, composed ones included (taken after the ids were made: it
            # holds every id they can name)
            table = self.open_vocab.table if self.open_vocab is not None else None
            whole = table.view() if table is not None else self.table
            chunks = -(-len(ids) // CHUNK)
            threads = min(cpus(), chunks)
            step = -(-len(ids) // (-(-chunks // threads) * threads))  # an even share each
        else:
            step = max(1, min(BLOCK, batch_size))
        starts = range(0, len(ids), step)
        with ThreadPoolExecutor(threads) if threads > 1 else nullcontext() as pool:
            blocks = (pool.map if pool else map)(
                lambda s: self._mean_block(ids[s : s + step], whole), starts)
            for s, (vectors, flat) in zip(starts, blocks, strict=True):
                out[s : s + len(vectors)] = vectors
                if counts is not None:
                    counts.add(flat, len(self.rows))
                if progress:
                    progress(len(vectors))
        return l2_normalize(out) if normalize else out

    def _mean_block(self, ids: Sequence[Sequence[int]], whole: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """(the means of these sentences' rows, their ids flat): one sparse product times
        `whole` (every row) where given, else a gather of their rows."""
        flat, lengths = flat_ids(ids)
        starts = np.cumsum(lengths) - lengths
        marks = self._negation_marks(flat, starts) if self.scope else None
        weights = tail_weights(lengths, starts)
        totals = lengths if weights is None else np.add.reduceat(weights, starts)
        if whole is not None:
            shares = (np.repeat((1.0 / lengths).astype(np.float32), lengths)
                      if weights is None
                      else (weights / np.repeat(totals, lengths)).astype(np.float32))
            return self._sparse_mean(whole, flat, lengths, marks, shares), flat
        rows = self._rows(flat)
        if marks is not None:
            scoped, cue = marks
            rows[scoped] *= self.scope[0]
            rows[cue] = 0
        if weights is not None:
            rows *= weights[:, None]
        means = np.add.reduceat(rows, starts, axis=0)
        means /= totals[:, None]
        return means, flat

    def _negation_marks(self, flat: np.ndarray, starts: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(tokens to scale: in a negation's scope and not cues themselves, the cues: counted
        as nothing), over concatenated sentences starting at `starts`; a cue inside another's
        scope ("not … no …") is a cue, as in the torch model."""
        roles = self.scope[1]
        # a composed word (an id past the table) is a plain word: never a cue or a scope's end
        roles = roles[flat] if len(roles) > int(flat.max(initial=0)) else np.where(
            flat < len(roles), roles[np.minimum(flat, len(roles) - 1)], 0)
        cue = roles == CUE
        return in_scope(roles, starts) & ~cue, cue

    def _sparse_mean(self, table: np.ndarray, flat: np.ndarray, lengths: np.ndarray,
                     marks: tuple[np.ndarray, np.ndarray] | None,
                     weights: np.ndarray) -> np.ndarray:
        """Rows of each sentence's token `weights` (summing to 1; 0 on negation cues), times
        the table; the words in a negation's scope once more, times the table and
        (scale - 1)."""
        from scipy.sparse import csr_matrix

        indptr = np.concatenate([[0], np.cumsum(lengths)])
        shape = (len(lengths), table.shape[0])
        if marks is None:
            return csr_matrix((weights, flat, indptr), shape=shape) @ table
        scoped, cue = marks
        out = csr_matrix((np.where(cue, 0, weights), flat, indptr), shape=shape) @ table
        if scoped.any():
            # the scoped words' entries alone: a product costs a row per entry, a zero too
            picked = np.flatnonzero(scoped)
            per_text = np.bincount(np.repeat(np.arange(len(lengths)), lengths)[picked],
                                   minlength=len(lengths))
            rows = csr_matrix((weights[picked], flat[picked],
                               np.concatenate([[0], np.cumsum(per_text)])), shape=shape)
            out += (rows @ table) * (self.scope[0] - 1)
        return out


def tail_weights(lengths: np.ndarray, starts: np.ndarray) -> np.ndarray | None:
    """Each token's weight in its sentence's mean, 1 for the first LEAD_TOKENS tokens and
    TAIL_WEIGHT after; None where no sentence is longer (a plain mean: a query's case)."""
    if int(lengths.max(initial=0)) <= LEAD_TOKENS:
        return None
    position = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)
    return np.where(position < LEAD_TOKENS, 1.0, TAIL_WEIGHT).astype(np.float32)
