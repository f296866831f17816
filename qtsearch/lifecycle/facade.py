"""`Index`: one object for an index's whole life, what `qtsearch.Index` is.

It builds, appends and deletes (qtsearch.lifecycle.writers) and checks (lifecycle.on_disk)
through the same functions as the command line, and searches through the engine
(qtsearch.search.searcher), so its results are the CLI's. A write replaces
the index folder in one step; the engine it holds is then opened again on the new folder, so
the next search sees the change. Searches may run from many threads at once; a write and
searches at the same time need a lock of the caller's own.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from qtsearch.core.errors import UsageError
from qtsearch.encoders.base import SentenceEncoder
from qtsearch.search.defaults import TOP_K
from qtsearch.search.fusion import SearchSettings
from qtsearch.search.hits import Record, Results
from qtsearch.search.rerank import Reranker
from qtsearch.search.searcher import CONTEXT_WINDOW, QUERY_PRECISION, Searcher

# what writes or reads the folder unopened is imported by the methods that do it, so that
# opening an index for search loads no more than the engine
if TYPE_CHECKING:
    from qtsearch.core.progress import Reporter
    from qtsearch.index.backend import VectorBackend
    from qtsearch.lifecycle.inputs import Source
    from qtsearch.lifecycle.writers import AddResult, DeleteResult
    from qtsearch.search.explain import Explainer
    from qtsearch.search.filters import Filter

Where = Mapping[str, str | int]


class Index:
    """An index folder, opened: `Index.build(...)` or `Index.open(path)`; close it (or use it
    in a `with` block) to release its files."""

    def __init__(self, searcher: Searcher, open_args: dict[str, Any]):
        self._searcher = searcher
        self._open_args = open_args  # how it was opened: a write opens it again the same way

    # -- making and opening ---------------------------------------------------------------

    @classmethod
    def build(cls, source: Source, path: str | os.PathLike,
              model: str | os.PathLike | None = None, *, reporter: Reporter | None = None,
              wait: float | None = 0.0, **options: Any) -> Index:
        """Build an index of `source` in the folder `path` and open it.

        `source`: a file or folder; a list of texts (str, one row each) and files or folders
        (`pathlib.Path`); or a mapping of record id to text (rows that `delete` and `upsert`
        find by id). `model`: a model folder or an encoder's name (None: the shipped model).
        `options`: the fields of `IndexConfig` (index, split_sentences, fit, overwrite,
        input_format, ...), as `qtsearch build-index` takes them. `wait`: seconds to wait for
        another writer of the folder (None: as long as it takes)."""
        from qtsearch.lifecycle.writers import build_folder

        build_folder(source, path, model, reporter=reporter, wait=wait, **options)
        return cls.open(path, device=options.get("device", "auto"))

    @classmethod
    def open(cls, path: str | os.PathLike, model: str | os.PathLike | SentenceEncoder | None = None,
             device: str = "auto", params: dict[str, Any] | None = None,
             precision: str = QUERY_PRECISION) -> Index:
        """Open an index folder with the model it was built with (`model`: that same model,
        by path or already loaded; another one is refused). `params` override the search
        parameters the build chose (nprobe for IVF, efSearch for HNSW). Queries are encoded
        in fp32 (`precision`), faster than bf16 one sentence at a time."""
        args = {"model": model, "device": device, "params": params, "precision": precision}
        return cls(Searcher.open(path, **args), args)

    def _reopen(self) -> None:
        """Open the folder again after a write swapped it, then let the old engine go."""
        old = self._searcher
        self._searcher = Searcher.open(old.path, **self._open_args)
        old.close()

    def close(self) -> None:
        self._searcher.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------------------

    def add(self, source: Source, *, split_sentences: bool | None = None,
            input_format: str = "auto", allow_duplicates: bool = False,
            reporter: Reporter | None = None, wait: float | None = 0.0) -> AddResult:
        """Append `source` (as `build` takes it) with the index's own model; the next search
        sees it. A file the index already holds is skipped (`AddResult.skipped` says so)
        unless `allow_duplicates`. `split_sentences` None: as the index was built."""
        return self._add(source, split_sentences, input_format, allow_duplicates, reporter,
                         wait, upsert=False)

    def upsert(self, source: Source, *, split_sentences: bool | None = None,
               input_format: str = "auto", allow_duplicates: bool = False,
               reporter: Reporter | None = None, wait: float | None = 0.0) -> AddResult:
        """`add`, where each record of `source` replaces the rows the index holds of the
        record with its id (`AddResult.replaced` counts them)."""
        return self._add(source, split_sentences, input_format, allow_duplicates, reporter,
                         wait, upsert=True)

    def _add(self, source: Source, split_sentences: bool | None, input_format: str,
             allow_duplicates: bool, reporter: Reporter | None, wait: float | None,
             upsert: bool) -> AddResult:
        from qtsearch.lifecycle.inputs import corpus_files
        from qtsearch.lifecycle.on_disk import Manifest
        from qtsearch.lifecycle.writers import add_to_index, split_option

        manifest = Manifest.read(self.path)
        split, _ = split_option(manifest, split_sentences)
        fields = manifest.read_options(split).fields
        with corpus_files(source, split, fields) as corpus:
            result = add_to_index(self.path, corpus, split_sentences, self._open_args["device"],
                                  reporter=reporter, input_format=input_format, wait=wait,
                                  allow_duplicates=allow_duplicates, upsert=upsert)
        if result.added or result.replaced:
            self._reopen()
        return result

    def delete(self, doc_ids: Sequence[str] = (), where: Where | None = None, *,
               wait: float | None = 0.0) -> DeleteResult:
        """Delete the rows of the records `doc_ids` that match `where` (column → value, as in
        `search`; both given: both must hold); the next search no longer finds them. Nothing
        matched: the index is unchanged and `DeleteResult.note` says so."""
        from qtsearch.lifecycle.writers import delete_from_index

        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        condition = self.filter_for(where) if where else None
        result = delete_from_index(self.path, doc_ids, condition, wait=wait)
        if result.deleted:
            self._reopen()
        return result

    # -- reading ----------------------------------------------------------------------------

    def search(self, query: str, k: int = TOP_K, mode: str | None = None,
               where: Where | None = None, rerank: Reranker | None = None,
               by: str = "passage", settings: SearchSettings | None = None) -> Results:
        """The `k` best stored passages (`by="doc"`: documents) for `query`, best first.

        `mode`: hybrid, semantic or lexical (None: hybrid where the index has a full-text
        table). `where`: metadata filters, column → value, AND-ed. `rerank`: re-score the
        first hits with another encoder. `settings`: this search's fusion settings (None: the
        index's own, `Index.settings`; `dataclasses.replace` them to change one). The Results
        carry the `query`, and a `note` when most of its words are unknown to the model."""
        if not isinstance(query, str):
            warnings.warn("Index.search takes one query; search_many takes a list",
                          DeprecationWarning, stacklevel=2)
            return self.search_many(query, k, mode, where, rerank, by,  # type: ignore[return-value]
                                    settings)
        return self.search_many([query], k, mode, where, rerank, by, settings)[0]

    def search_many(self, queries: Sequence[str], k: int = TOP_K, mode: str | None = None,
                    where: Where | None = None, rerank: Reranker | None = None,
                    by: str = "passage", settings: SearchSettings | None = None) -> list[Results]:
        """`search` for each of `queries` at once (one encoding batch): one Results each."""
        if isinstance(queries, str):
            raise UsageError("Index.search_many takes a list of queries; search takes one")
        queries = list(queries)
        found = self._searcher.search(queries, k, mode, where, rerank, by, settings)
        for query, results in zip(queries, found, strict=True):
            results.query = query
        return found

    def search_ids(self, ids: Sequence[int], k: int = TOP_K, exclude_self: bool = True,
                   where: Where | None = None) -> list[Results]:
        """The `k` nearest rows to each stored row `ids` by their vectors (each left out of
        its own list unless `exclude_self` is False): one Results per id."""
        return self._searcher.search_ids(ids, k, exclude_self, where)

    def get(self, ids: Sequence[int]) -> list[Record]:
        """Stored rows by id (hit.id), in the order asked."""
        return self._searcher.get(ids)

    def context(self, id: int, window: int = CONTEXT_WINDOW) -> list[Record]:
        """Row `id` with up to `window` rows before and after it in its document."""
        return self._searcher.context(id, window)

    def analogy(self, a: str, b: str, c: str, k: int = TOP_K,
                exclude_inputs: bool = True) -> Results:
        """Stored sentences d with a : b :: c : d, by their vectors."""
        return self._searcher.analogy(a, b, c, k, exclude_inputs)

    def explainer(self) -> Explainer:
        """Why each hit of this index ranks where it does: `explainer().explain(query, hits)`,
        one JSON-ready dict a hit (each leg's score and rank, the query's words it holds),
        what `qtsearch search --explain` shows."""
        from qtsearch.search.explain import Explainer  # a search without --explain skips it

        return Explainer(self._searcher)

    def warm_up(self, wait: bool = False) -> None:
        """Load what the first queries would (a long-lived process calls this once)."""
        self._searcher.warm_up(wait)

    # -- describing ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._searcher.path

    @property
    def default_mode(self) -> str:
        """The search mode of `search(mode=None)`: hybrid, or semantic without a full-text
        table."""
        return self._searcher.default_mode

    @property
    def settings(self) -> SearchSettings:
        """How `search` ranks unless told otherwise: the fusion, BM25's weight, the semantic
        leg's feedback and the candidates per leg, resolved for this index's model and rows."""
        return self._searcher.settings

    @property
    def weak_cosine(self) -> float | None:
        """The model's weak-match threshold: a best cosine under it is a poor answer (None:
        not calibrated for this model)."""
        return self._searcher.weak_cosine

    def resolve_mode(self, mode: str | None) -> str:
        """`mode` as `search` runs it (None: `default_mode`); UsageError for an unknown mode
        or one this index cannot run."""
        return self._searcher.resolve_mode(mode)

    def filter_for(self, where: Where | None) -> Filter:
        """The rows `where` selects (as `search` and `delete` take it), checked against the
        index's columns; UsageError for an unknown column or a bad value."""
        return self._searcher.filter_for(where)

    def describe(self) -> str:
        """One line: the rows, the index type, the model and the search mode."""
        return self._searcher.describe()

    def __len__(self) -> int:
        return self._searcher.count

    def info(self) -> dict[str, Any]:
        """What `qtsearch info --json` prints: the manifest (count, model, index type, input
        files, builds and writes), the folder and its size."""
        from qtsearch.lifecycle.on_disk import index_info

        return index_info(self.path)

    def check(self) -> list[str]:
        """What `qtsearch check` finds, one line a problem (empty: the index is whole): each
        file against its recorded sha256, and vectors, rows and the manifest's count. As
        `check` does, a whole index gets the times of files copied without them recorded."""
        from qtsearch.lifecycle.on_disk import check_folder

        return check_folder(self.path)[1]

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}: {self.describe()})"

    # -- vectors ------------------------------------------------------------------------------

    @property
    def encoder(self) -> SentenceEncoder:
        """The model the index was built with, as loaded for its queries (pass it to
        `Index.open` to open this or another folder of that model without loading it again)."""
        return self._searcher.encoder

    def embed(self, queries: Sequence[str]) -> np.ndarray:
        """The vectors a semantic search of `queries` ranks the stored ones by [n, dim]: the
        model's, normalised and passed through the index's fitted transform."""
        return self._searcher.embed(list(queries))

    @property
    def backend(self) -> VectorBackend:
        """The vector search alone, behind the index seam (qtsearch.index.backend), with the
        search parameters the index opened with: what a benchmark of index types or of GPU
        search times beside the whole search. Its `set_params` changes every search's."""
        return self._searcher.backend
