"""Query an index: nearest sentences to new sentences, to stored sentences, and analogies.

`Searcher.open(folder)` loads the encoder, the vector backend (qtsearch.index.backend), the
fitted vector transform when the index has one, and the metadata store once. A search is
`semantic` (one encoding, one vector search), `lexical` (BM25, qtsearch.search.lexical) or
`hybrid` (both legs fused by qtsearch.search.fusion; on a large index the lexical leg runs in a
thread beside the encoding). Vectors are L2-normalised and ranked by inner product: a semantic
score is a cosine (approximate for quantised index types); with a word table the first hits
are then re-scored word by word (qtsearch.search.alignment). `where` filters on metadata
columns with exact results (qtsearch.search.filters)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.errors import InputError, UnusableIndex, UsageError
from qtsearch.encoders.base import IndexEncoder
from qtsearch.index import META_FILE
from qtsearch.index.backend import VectorBackend, search_each
from qtsearch.index.manifest import Manifest
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import VectorTransform
from qtsearch.search.alignment import RowTokens, aligns, realign_all
from qtsearch.search.analogy import analogy
from qtsearch.search.defaults import ALONE_UP_TO, MODES, TOP_K
from qtsearch.search.explain import Asked, basis_of, weak_cosine
from qtsearch.search.filters import Filter, make_filter
from qtsearch.search.fusion import (
    LEXICAL_WEIGHT,
    Leg,
    SearchSettings,
    fuse,
    settings_for,
    with_feedback,
)
from qtsearch.search.hits import Hit, Record, Results, check_unit, deepen
from qtsearch.search.lexical import LexicalSearch, stop_words_note
from qtsearch.search.opening import model_for, open_parts, read_through
from qtsearch.search.rerank import Reranker
from qtsearch.search.words import composed_note, note_for, query_text, unknown_words, vocabulary

log = logging.getLogger("qtsearch")
#: Queries are encoded one or a few at a time, where bf16 autocast costs more than it saves
#: (docs/searching.md, "From Python"). The vectors differ from bf16-built index vectors only
#: at bf16's rounding: harmless for ranking.
QUERY_PRECISION = "fp32"
#: Sentences shown on either side of a hit by `context()` unless asked otherwise.
CONTEXT_WINDOW = 2
#: Rows from which hybrid search runs its lexical leg in a thread beside the encoding; below,
#: both legs are mostly Python taking turns at the GIL, and the hand-offs cost more than the
#: overlap saves (docs/speed.md, "The lexical leg beside the encoding").
LEGS_BESIDE_FROM = 500_000
NO_LEXICAL = ("has neither BM25 files nor a full-text table, so it answers semantic search "
              "only; rebuild it with `qtsearch build-index` to add lexical and hybrid search")


class Searcher:
    """An opened index folder: `search`, `search_ids`, `analogy` and `context`, callable from
    many threads at once (`qtsearch serve` shares one between all its requests)."""

    def __init__(self, path: Path, manifest: Manifest, encoder: IndexEncoder,
                 backend: VectorBackend, store: MetadataStore,
                 transform: VectorTransform | None = None,
                 lexical: LexicalSearch | None = None):
        self.path = path
        self.manifest = manifest
        self.encoder = encoder
        self.backend = backend
        self.store = store
        self.transform = transform
        self.lexical = lexical
        self.count = backend.ntotal
        self.params = backend.params
        self.set_params(manifest.index_params)
        self.default_mode = "hybrid" if lexical is not None else "semantic"
        # BM25's weight in the convex fusion (the model's own when its folder records one) and
        # the feedbacks, moved towards the passages' by the rows' mean length; k1 and b: the files'
        bm25 = lexical.bm25 if lexical is not None else None
        self.settings: SearchSettings = settings_for(
            float(encoder.search.get("lexical_weight", LEXICAL_WEIGHT)),
            bm25.avglen if bm25 else None, (bm25.k1, bm25.b) if bm25 else None)
        self.weak_cosine = weak_cosine(encoder)  # None: not calibrated for this model
        self._columns = store.columns()
        # made here, not on first use, where concurrent first queries would each make one
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="qtsearch-lexical")
        #: the token ids of the rows word alignment read (None: the model has no word table)
        self.row_tokens = RowTokens(encoder) if aligns(encoder) else None

    @classmethod
    def open(cls, path: str | os.PathLike, model: str | os.PathLike | IndexEncoder | None = None,
             device: str = "auto", params: dict[str, Any] | None = None,
             precision: str = QUERY_PRECISION) -> Searcher:
        """Open an index folder with the model it was built with (or `model`, which must be
        that same model: vectors from another model are meaningless against this index).

        `params` override the manifest's search-time parameters (e.g. {"nprobe": 32}).
        """
        folder = Path(path)
        manifest = Manifest.read(folder)
        encoder = model_for(folder, manifest, model, device, precision)
        parts = open_parts(folder, manifest, encoder, device)
        if parts[-1] is None:
            log.warning("%s %s", folder, NO_LEXICAL)
        index = cls(folder, manifest, encoder, *parts)
        if params:
            try:
                index.set_params(params)
            except UnusableIndex as e:  # the user's override, not the index, is at fault
                index.close()
                raise UsageError(f"search parameters {params} do not apply to a "
                                 f"{index.index_type} index ({index.manifest.index_key}); "
                                 "IVF takes nprobe, HNSW efSearch, refined IVF-PQ "
                                 "also k_factor_rf") from e
        return index

    # -- configuration -----------------------------------------------------------------------

    @property
    def index_type(self) -> str:
        return self.manifest.index_type

    def set_params(self, params: dict[str, Any]) -> None:
        """Apply search-time parameters by name (nprobe, efSearch, k_factor_rf)."""
        self.backend.set_params(params)

    def clamp(self, k: int) -> int:
        if k < 1:
            raise UsageError(f"k must be at least 1 (got {k})")
        if k > self.count:
            log.warning("k=%d is larger than the index (%d sentences); returning all of them",
                        k, self.count)
            return self.count
        return k

    def resolve_mode(self, mode: str | None) -> str:
        """`mode`, or the index's default for None; refused when unknown or unsupported."""
        mode = mode or self.default_mode
        if mode not in MODES:
            raise UsageError(f"unknown search mode {mode!r}; choose from {', '.join(MODES)}")
        if mode != "semantic" and self.lexical is None:
            raise UnusableIndex(f"{mode} search: {self.path} {NO_LEXICAL}")
        return mode

    # -- queries ------------------------------------------------------------------------------

    def _check_query(self, sentence: str) -> str:
        text = query_text(sentence)
        if self.encoder.known_words(text) == 0:
            raise InputError(f"query {text!r}: none of its words is in the model's vocabulary, "
                             "so it has no meaningful vector")
        return text

    def embed(self, sentences: Sequence[str]) -> np.ndarray:
        """Query vectors in the index's space [n, dim] (the model's vectors, normalised and
        passed through the index's fitted transform); refuses empty and all-unknown queries."""
        if isinstance(sentences, str):
            sentences = [sentences]
        return self._vectors([self._check_query(s) for s in sentences])

    def _vectors(self, texts: list[str]) -> np.ndarray:
        # each alone, as search_each, unless a vector has the same bits in any batch
        rowwise = self.encoder.rowwise and (self.transform is None or self.transform.by_row)
        if 1 < len(texts) <= ALONE_UP_TO and not rowwise:
            return np.concatenate([self._vectors([t]) for t in texts])
        vectors = self.encoder.encode(texts, normalize=True)
        return self.transform.apply(vectors) if self.transform is not None else vectors

    def search_vectors(self, vectors: np.ndarray, k: int,
                       where: Mapping[str, str | int] | None = None) -> list[Results]:
        """Nearest stored sentences to vectors already in the index's space [n, dim]."""
        k = self.clamp(k)
        q = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.backend.d)
        scores, ids = self._nearest(q, k, self.filter_for(where))
        legs = [{int(i): float(s) for s, i in zip(sr, ir, strict=True) if i >= 0}
                for sr, ir in zip(scores, ids, strict=True)]
        return self._hits([(leg, {"semantic": leg}) for leg in legs])

    def filter_for(self, where: Mapping[str, str | int] | None) -> Filter:
        """The SQL condition for `where`; UsageError for an unknown column or bad value."""
        return make_filter(where, self._columns)

    def _nearest(self, q: np.ndarray, k: int, flt: Filter) -> tuple[np.ndarray, np.ndarray]:
        ids = self.store.ids_where(flt.clause, flt.params) if flt else None
        return search_each(self.backend, q, k, ids, ALONE_UP_TO)

    def search(self, sentences: str | Sequence[str], k: int = TOP_K, mode: str | None = None,
               where: Mapping[str, str | int] | None = None,
               rerank: Reranker | None = None, by: str = "passage",
               settings: SearchSettings | None = None) -> list[Results]:
        """The k best stored sentences (passages) or documents for each query, best first.

        `mode`: one of MODES (None: hybrid where the index has BM25 files or a full-text
        table, else semantic). `where`: metadata filters, column -> value, AND-ed (e.g. {"source":
        "emma.txt"}). `rerank`: re-score the first `rerank.depth` hits with its encoder
        (qtsearch.search.rerank). `by`: one of UNITS; "doc" ranks documents by their best
        passage, each hit then carries the document's other matching `passages`. `settings`:
        this search's (None: the index's own, `self.settings`), the others unchanged. A text
        stored more than once is shown once. A query most of whose words the model does not
        know is searched lexically only in hybrid mode, and its Results carry a `note`."""
        check_unit(by)
        k = self.clamp(k)
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        if rerank is not None:  # the first stage's `depth` best, each text (document) once
            return rerank(texts, self.search(texts, max(k, rerank.depth), mode, where,
                                             by=by, settings=settings), k)
        chosen = self.settings.for_search(settings)
        return deepen(lambda fetch, which: self._search([texts[n] for n in which], fetch, mode,
                                                        where, chosen), len(texts), k, by,
                      self.count)

    def _search(self, sentences: str | Sequence[str], k: int, mode: str | None,
                where: Mapping[str, str | int] | None, settings: SearchSettings) -> list[Results]:
        mode = self.resolve_mode(mode)
        texts = [query_text(s) for s in ([sentences] if isinstance(sentences, str) else sentences)]
        flt = self.filter_for(where)
        fetch = max(k, min(settings.candidates, self.count)) if mode == "hybrid" else k
        align = settings.alignment > 0 and mode != "lexical" and self.row_tokens is not None
        if align:
            fetch = max(fetch, min(settings.alignment_depth, self.count))
        # the lexical leg first (the longer one at 1M): its thread runs beside all that follows
        lexical = None if mode == "semantic" else self._lexical_legs(
            texts, fetch, flt, mode, settings.lexical_feedback if mode == "hybrid" else 0.0)
        unknown = [unknown_words(self.encoder, t) if mode != "lexical" else [] for t in texts]
        notes = [note_for(t, u, mode) for t, u in zip(texts, unknown, strict=True)]
        # a lexical leg matching stop-words only ranks noise: noted, and kept out of hybrid
        stop_only = [mode != "semantic" and self.lexical is not None
                     and self.lexical.stop_words_only(t) for t in texts]
        if mode == "semantic":
            for t in texts:
                self._check_query(t)  # a query of unknown words only has no vector at all
        vector_rows = [i for i, t in enumerate(texts) if mode == "semantic" or (
            mode == "hybrid" and notes[i] is None and self.encoder.known_words(t) > 0)]
        semantic: dict[int, Leg] = {}
        vectors = self._vectors([texts[i] for i in vector_rows]) if vector_rows else None
        lex: list[Leg] = []
        if vectors is not None and mode == "hybrid" and settings.feedback > 0 and lexical:
            lex = lexical()
            vectors = with_feedback(vectors, [lex[row] for row in vector_rows],
                                    self.backend.reconstruct, settings.feedback)
        if vectors is not None:
            scores, ids = self._nearest(vectors, fetch, flt)
            for row, sr, ir in zip(vector_rows, scores, ids, strict=True):
                semantic[row] = {int(i): float(s) for s, i in zip(sr, ir, strict=True) if i >= 0}
        if lexical is not None and not lex:
            lex = lexical()
        ranked, bases = [], []
        for row in range(len(texts)):
            if mode == "semantic" or (stop_only[row] and row in semantic):
                ranked.append((semantic[row], {"semantic": semantic[row]}))
            elif row not in semantic:
                ranked.append((lex[row], {"lexical": lex[row]}))
            else:
                ranked.append(self._fuse(semantic[row], lex[row], fetch,
                                         vectors[vector_rows.index(row)], settings))
            bases.append(basis_of(ranked[-1][1], {"semantic": semantic.get(row), "lexical":
                                  lex[row] if lex else None}, settings))
        # the first hits looked at again, word by word
        fetched = realign_all(texts, ranked, bases, list(semantic), settings.alignment_depth,
                              settings.alignment, self.encoder, self.row_tokens,
                              self.store.get) if align else {}
        # a query leaning on composed words keeps its semantic leg; its note says so
        return self._hits(ranked, k, Asked(texts, [
            n or (stop_words_note(t, mode) if s else composed_note(self.encoder, t, mode))
            for n, t, s in zip(notes, texts, stop_only, strict=True)], bases, bool(flt)), fetched)

    def _lexical_legs(self, texts: list[str], fetch: int, flt: Filter, mode: str,
                      feedback: float) -> Callable[[], list[Leg]]:
        """The lexical leg of every query, with `feedback` (LexicalSearch.search): in hybrid mode
        on a large index started in the worker thread, to run beside the encoding; else here."""
        assert self.lexical is not None
        lexical = self.lexical

        def run() -> list[Leg]:
            return [dict(lexical.search(t, fetch, flt.clause, flt.params, feedback)) for t in texts]

        if mode == "lexical" or self.count < LEGS_BESIDE_FROM:
            legs = run()
            return lambda: legs
        return self._pool.submit(run).result

    def _fuse(self, semantic: Leg, lexical: Leg, fetch: int, q: np.ndarray,
              settings: SearchSettings) -> tuple[Leg, dict[str, Leg]]:
        def cosine_of(ids: list[int]) -> np.ndarray | None:
            stored = self.backend.reconstruct(np.asarray(ids, dtype=np.int64))
            return None if stored is None else stored @ q

        return fuse(settings.fusion, semantic, lexical, len(lexical) < fetch, cosine_of,
                    settings.lexical_weight)

    def _hits(self, ranked: list[tuple[Leg, dict[str, Leg]]], k: int | None = None,
              asked: Asked | None = None,
              fetched: Mapping[int, dict[str, Any]] | None = None) -> list[Results]:
        """Hits with their metadata, `k` per query, from each query's fused ranking and the
        per-leg scores; `asked`: the queries, their notes and bases; `fetched`: rows read."""
        tops = [list(order)[:k] for order, _ in ranked]
        known = fetched or {}
        rows = {**known, **self.store.get(sorted({i for top in tops for i in top} - set(known)))}
        results = []
        for n, (top, (order, legs)) in enumerate(zip(tops, ranked, strict=True)):
            hits = [Hit(**rows[i], score=order[i],
                        legs={name: leg[i] for name, leg in legs.items() if i in leg})
                    for i in top if i in rows]
            note = asked.note(n, hits, self.weak_cosine) if asked else None
            results.append(Results(hits, note, basis=asked.bases[n] if asked else None))
            if note:
                log.warning("%s", note)
        return results

    def get(self, ids: Sequence[int]) -> list[Record]:
        """Stored sentences by id, in the order asked; an unknown id is an InputError."""
        rows = self.store.get(wanted := [self._check_id(i) for i in ids])
        return [Record(**rows[i]) for i in wanted]

    def _check_id(self, i: int) -> int:
        try:
            n = int(i)
        except (TypeError, ValueError) as e:
            raise InputError(f"{i!r} is not a sentence id") from e
        if not 0 <= n < self.count:
            raise InputError(f"no sentence with id {n} (ids run from 0 to {self.count - 1})")
        return n

    def search_ids(self, ids: Sequence[int], k: int = TOP_K, exclude_self: bool = True,
                   where: Mapping[str, str | int] | None = None) -> list[Results]:
        """The k nearest neighbours of stored sentences (each one left out of its own list
        unless `exclude_self` is False), their text re-encoded: exact for every index type."""
        records = self.get(ids)
        k = self.clamp(k)
        vectors = self._vectors([r.text for r in records])
        results = self.search_vectors(vectors, k + (exclude_self and k < self.count), where)
        if exclude_self:
            results = [Results([h for h in hits if h.id != r.id][:k])
                       for r, hits in zip(records, results, strict=True)]
        return results

    def analogy(self, a: str, b: str, c: str, k: int = TOP_K,
                exclude_inputs: bool = True) -> Results:
        """Sentences d with a : b :: c : d (qtsearch.search.analogy)."""
        return analogy(self, a, b, c, k, exclude_inputs)

    def context(self, id: int, window: int = CONTEXT_WINDOW) -> list[Record]:
        """The sentence `id` with up to `window` sentences before and after it in its document."""
        if window < 0:
            raise UsageError(f"window must be 0 or more (got {window})")
        (record,) = self.get([id])
        return [Record(**row) for row in self.store.context(record.doc, record.position, window)]

    def warm_up(self, wait: bool = False) -> None:
        """Run one throw-away query of each leg (torch, faiss and the lexical thread start
        lazily: hundreds of ms). Then in a background thread (`wait`: until done) count the
        index's words, stem the model's, compute the encoder's per-word projections, read the
        store and the backend's files into the page cache (a cold query of a large graph
        index is many times slower)."""
        self.backend.search(self._vectors(["warm up"]), 1)
        if self.lexical is not None:  # the worker thread started, the BM25 code paged in
            self._lexical_legs(["warm up"], 1, make_filter(None, []), "hybrid", 0.0)()
        files = [self.path / META_FILE, *self.backend.warm_files()]

        def warm() -> None:
            if self.lexical is not None:
                self.lexical.learn_counts(vocabulary(self.encoder))
            self.encoder.warm_up()
            for f in files:
                read_through(f)
            self.backend.touch_pages()

        reader = threading.Thread(target=warm, name="qtsearch-warm-up", daemon=True)
        reader.start()
        if wait:
            reader.join()

    def describe(self) -> str:
        """One line for humans: size, index type, parameters, model and search mode."""
        params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in self.params.items())
        model = self.manifest.model.name or self.encoder.name
        return (f"{self.count:,} sentences, {self.index_type} index"
                f"{f' ({params})' if params else ''}, model {model} ({self.encoder.dim}-d), "
                f"{self.default_mode} search")

    def close(self) -> None:
        self._pool.shutdown()
        if self.lexical is not None:
            self.lexical.store.close()
        self.store.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

