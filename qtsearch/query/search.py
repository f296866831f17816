"""Query an index: nearest sentences to new sentences, to stored sentences, and analogies.

`Index.open(folder)` loads the encoder, the faiss index and the metadata store once; every
query after that costs one encoding, one faiss search and one primary-key lookup. Vectors are
L2-normalised and the faiss index ranks by inner product, so a hit's score is its cosine
similarity to the query (approximate for quantised index types).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from qtsearch.encode.encoder import Encoder, load_encoder
from qtsearch.errors import IndexError_, InputError, ModelError, UsageError
from qtsearch.index import (
    INDEX_FILE,
    META_FILE,
    apply_search_params,
    open_faiss_index,
    read_manifest,
    threads_for,
)
from qtsearch.index.faiss_backend import flat_vectors
from qtsearch.index.gpu import FlatSearch
from qtsearch.index.store import MetadataStore
from qtsearch.text.tokenizer import tokenize

log = logging.getLogger("qtsearch")

#: Queries are encoded one or a few at a time, where bf16 autocast costs more than it saves:
#: one 19-token sentence took 5.5 ms with bf16 autocast and 1.2 ms in fp32 (tiny GRU, 1 core).
#: The vectors differ from bf16-built index vectors by ~1e-3 in cosine: harmless for ranking.
QUERY_PRECISION = "fp32"
#: Sentences shown on either side of a hit by `context()` unless asked otherwise.
CONTEXT_WINDOW = 2


@dataclass(frozen=True)
class Record:
    """A stored sentence and where it came from (line is 1-based, position counts within doc)."""

    id: int
    text: str
    source: str
    line: int
    doc: int
    position: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Hit(Record):
    """A search result: a stored sentence and its cosine similarity to the query."""

    score: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape scripts rely on: id, score, text, source, line, doc, position."""
        d = dataclasses.asdict(self)
        return {"id": d.pop("id"), "score": d.pop("score"), **d}


def _read_through(path: Path, chunk: int = 1 << 26) -> None:
    """Read a file once, discarding the bytes, to pull it into the OS page cache."""
    with contextlib.suppress(OSError), open(path, "rb", buffering=0) as fh:
        while fh.read(chunk):
            pass


def _normalise(v: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return (v / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def _same_sentence(a: str, b: str) -> bool:
    """Equal up to spacing and case: what a user means by "that is one of my inputs"."""
    return [t.casefold() for t in tokenize(a)] == [t.casefold() for t in tokenize(b)]


class Index:
    """An opened index folder: `search`, `search_ids`, `analogy` and `context`."""

    def __init__(self, path: Path, manifest: dict[str, Any], encoder: Encoder,
                 faiss_index: faiss.Index, store: MetadataStore):
        self.path = path
        self.manifest = manifest
        self.encoder = encoder
        self.faiss_index = faiss_index
        self.store = store
        self.count = int(faiss_index.ntotal)
        self.params: dict[str, Any] = {}
        self.set_params(manifest.get("index_params") or {})
        self.gpu_search: FlatSearch | None = None
        if encoder.device.type == "cuda":
            vectors = flat_vectors(faiss_index)
            if vectors is None:
                log.info("a %s index is searched on the CPU (GPU search covers flat indexes)",
                         self.index_type)
            else:  # exact search at GPU memory bandwidth, the vectors held in fp16
                self.gpu_search = FlatSearch(vectors, encoder.device)

    @classmethod
    def open(cls, path: str | os.PathLike, model: str | os.PathLike | Encoder | None = None,
             device: str = "auto", params: dict[str, Any] | None = None,
             precision: str = QUERY_PRECISION) -> Index:
        """Open an index folder with the model it was built with (or `model`, which must be
        that same model: vectors from another model are meaningless against this index).

        `params` override the manifest's search-time parameters (e.g. {"nprobe": 32}).
        """
        folder = Path(path)
        manifest = read_manifest(folder)
        encoder = cls._load_model(folder, manifest, model, device, precision)
        faiss_index = open_faiss_index(folder / INDEX_FILE, mmap=True)  # read-only use
        dim = int(manifest.get("dim", faiss_index.d))
        if faiss_index.d != dim or encoder.dim != dim:
            raise IndexError_(f"{folder}: dimension mismatch (manifest {dim}, faiss index "
                              f"{faiss_index.d}, model {encoder.dim}); rebuild the index")
        store = MetadataStore.open(folder / META_FILE, readonly=True)
        rows = store.count()
        if rows != faiss_index.ntotal:
            store.close()
            raise IndexError_(f"{folder}: the faiss index holds {faiss_index.ntotal:,} vectors "
                              f"but the metadata {rows:,} rows; rebuild the index")
        index = cls(folder, manifest, encoder, faiss_index, store)
        if params:
            try:
                index.set_params(params)
            except IndexError_ as e:  # the user's override, not the index, is at fault
                store.close()
                raise UsageError(f"search parameters {params} do not apply to a "
                                 f"{index.index_type} index ({index.manifest['index_key']}); "
                                 "IVF takes nprobe, HNSW efSearch, refined IVF-PQ "
                                 "also k_factor_rf") from e
        return index

    @staticmethod
    def _load_model(folder: Path, manifest: dict[str, Any],
                    model: str | os.PathLike | Encoder | None, device: str,
                    precision: str) -> Encoder:
        info = manifest.get("model") or {}
        if isinstance(model, Encoder):
            encoder = model
        elif model is not None:
            encoder = load_encoder(model, device=device, precision=precision)
        else:
            where = info.get("path")
            if not where:
                raise IndexError_(f"{folder}: the manifest names no model; pass a model")
            if not Path(where).exists():
                raise ModelError(f"the model this index was built with is gone ({where}); "
                                 "pass the same model with --model")
            encoder = load_encoder(where, device=device, precision=precision)
        expected = info.get("fingerprint")
        if expected and encoder.fingerprint != expected:
            raise ModelError(
                f"{folder} was built with model {info.get('name', '?')} (fingerprint {expected}) "
                f"but {encoder.path} has fingerprint {encoder.fingerprint}: its vectors do not "
                "match this index; use the same model or rebuild the index")
        return encoder

    # -- configuration -----------------------------------------------------------------------

    @property
    def index_type(self) -> str:
        return str(self.manifest.get("index_type", "?"))

    def set_params(self, params: dict[str, Any]) -> None:
        """Apply faiss search-time parameters by name (nprobe, efSearch, k_factor_rf)."""
        apply_search_params(self.faiss_index, params)
        self.params.update(params)

    def _clamp(self, k: int) -> int:
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        if k > self.count:
            log.warning("k=%d is larger than the index (%d sentences); returning all of them",
                        k, self.count)
            return self.count
        return k

    # -- queries ------------------------------------------------------------------------------

    def _check_query(self, sentence: str) -> str:
        if not isinstance(sentence, str):
            raise UsageError(f"a query must be a string, not {type(sentence).__name__}")
        text = sentence.strip()
        if not text:
            raise InputError("empty query: type a sentence")
        if self.encoder.known_words(text) == 0:
            raise InputError(f"query {text!r}: none of its words is in the model's vocabulary, "
                             "so it has no meaningful vector")
        return text

    def embed(self, sentences: Sequence[str]) -> np.ndarray:
        """Normalised query vectors [n, dim]; refuses empty and all-unknown-word queries."""
        if isinstance(sentences, str):
            sentences = [sentences]
        texts = [self._check_query(s) for s in sentences]
        return self.encoder.encode(texts, normalize=True)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """Nearest stored sentences to already-normalised vectors [n, dim]."""
        k = self._clamp(k)
        q = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.faiss_index.d)
        searcher = self.gpu_search or self.faiss_index
        with threads_for(self.faiss_index, len(q)):
            scores, ids = searcher.search(q, k)
        rows = self.store.get(np.unique(ids[ids >= 0]).tolist())
        results = []
        for srow, irow in zip(scores, ids, strict=True):
            hits = [Hit(**rows[int(i)], score=float(s))
                    for s, i in zip(srow, irow, strict=True) if i >= 0 and int(i) in rows]
            results.append(hits)
        return results

    def search(self, sentences: str | Sequence[str], k: int = 10) -> list[list[Hit]]:
        """The k stored sentences nearest to each query sentence, best first."""
        k = self._clamp(k)
        return self.search_vectors(self.embed(sentences), k)

    def get(self, ids: Sequence[int]) -> list[Record]:
        """Stored sentences by id, in the order asked; an unknown id is an InputError."""
        wanted = [self._check_id(i) for i in ids]
        rows = self.store.get(wanted)
        return [Record(**rows[i]) for i in wanted]

    def _check_id(self, i: int) -> int:
        try:
            n = int(i)
        except (TypeError, ValueError) as e:
            raise InputError(f"{i!r} is not a sentence id") from e
        if not 0 <= n < self.count:
            raise InputError(f"no sentence with id {n} (ids run from 0 to {self.count - 1})")
        return n

    def search_ids(self, ids: Sequence[int], k: int = 10,
                   exclude_self: bool = True) -> list[list[Hit]]:
        """The k nearest neighbours of stored sentences (each one left out of its own list
        unless `exclude_self` is False). The stored text is re-encoded, which gives the exact
        vector for every index type, quantised ones included."""
        records = self.get(ids)
        k = self._clamp(k)
        vectors = self.encoder.encode([r.text for r in records], normalize=True)
        extra = 1 if exclude_self and k < self.count else 0
        results = self.search_vectors(vectors, k + extra)
        if exclude_self:
            results = [[h for h in hits if h.id != r.id][:k]
                       for r, hits in zip(records, results, strict=True)]
        return results

    def analogy(self, a: str, b: str, c: str, k: int = 10,
                exclude_inputs: bool = True) -> list[Hit]:
        """Sentences d with a : b :: c : d, ranked by cos(d, normalise(c + b − a)) over
        normalised vectors (the Quick-Thoughts analogy query). The three inputs themselves
        are left out unless `exclude_inputs` is False."""
        va, vb, vc = self.embed([a, b, c])
        query = vc + vb - va
        if np.linalg.norm(query) < 1e-6:
            raise InputError("the analogy cancels out (c + b − a is zero): nothing to search for")
        query = _normalise(query)[None, :]
        k = self._clamp(k)
        if not exclude_inputs:
            return self.search_vectors(query, k)[0]
        inputs = [a, b, c]
        fetch = min(k + 3, self.count)
        while True:
            hits = [h for h in self.search_vectors(query, fetch)[0]
                    if not any(_same_sentence(h.text, s) for s in inputs)]
            # duplicates of the inputs can crowd the list: widen until k remain or all seen
            if len(hits) >= k or fetch >= self.count:
                return hits[:k]
            fetch = min(fetch * 4, self.count)

    def context(self, id: int, window: int = CONTEXT_WINDOW) -> list[Record]:
        """The sentence `id` with up to `window` sentences before and after it in its document."""
        if window < 0:
            raise UsageError(f"window must be 0 or more (got {window})")
        (record,) = self.get([id])
        return [Record(**row) for row in self.store.context(record.doc, record.position, window)]

    def warm_up(self, wait: bool = False) -> None:
        """Run one throw-away query: torch and faiss initialise lazily, and the first real
        query would otherwise pay for it (hundreds of milliseconds). Then read the metadata
        store, and the memory-mapped index file where it is searched by random access (HNSW,
        IVF, SQ), once in a background thread (`wait`: until done), so later queries find
        their pages in RAM: on a cold 1M-sentence HNSW index a query took ~90 ms of page
        faults instead of 2 ms. An HNSW graph's vectors are also touched page by page: the
        first touch of a mapped page faults even when the file is cached. The same thread
        first computes the query encoder's per-word input projections (Encoder.warm_up)."""
        vector = self.encoder.encode(["warm up"], normalize=True)
        self.faiss_index.search(vector, 1)
        files = [self.path / META_FILE]
        if self.index_type != "flat":  # a flat index is read whole by every query anyway
            files.append(self.path / INDEX_FILE)
        graph = faiss.downcast_index(self.faiss_index)
        mapped = flat_vectors(graph.storage) if isinstance(graph, faiss.IndexHNSW) else None

        def warm() -> None:
            self.encoder.warm_up()
            for f in files:
                _read_through(f)
            if mapped is not None:  # map every page of the graph's vectors into this process
                mapped.reshape(-1)[::1024].sum()

        reader = threading.Thread(target=warm, name="qtsearch-warm-up", daemon=True)
        reader.start()
        if wait:
            reader.join()

    def describe(self) -> str:
        """One line for humans: size, index type, parameters and model."""
        params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in self.params.items())
        model = (self.manifest.get("model") or {}).get("name") or self.encoder.name
        return (f"{self.count:,} sentences, {self.index_type} index"
                f"{f' ({params})' if params else ''}, model {model} ({self.encoder.dim}-d)")

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
