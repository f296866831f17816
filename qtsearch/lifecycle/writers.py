"""The writers of an index folder: build, add (and upsert), delete, as `Index` and the
commands run them, and the options and stages that describe a build.

The options and stages are numpy-free (the commands' help texts show them). Each writer is
imported from its module on first use (`build_index` pulls in the whole build, `add_to_index`
the encoders), so a command that appends does not load the build, and opening an index for
search loads none of them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtsearch.core.errors import UsageError
from qtsearch.core.lazy_names import lazy_names
from qtsearch.index.choose import FLAT_MAX, PARTITIONED, SQ8_MAX, WHITEN
from qtsearch.indexing.build_config import IndexConfig
from qtsearch.indexing.state import BESIDE_EMBED, STAGES, total_seconds

#: The options of `Index.build` beyond where the corpus is, the model and the folder.
BUILD_OPTIONS = tuple(f.name for f in dataclasses.fields(IndexConfig)
                      if f.name not in ("corpus", "model", "out"))

if TYPE_CHECKING:
    from qtsearch.core.progress import Reporter
    from qtsearch.indexing.append import AddResult, add_to_index, split_option
    from qtsearch.indexing.delete import DeleteResult, delete_from_index
    from qtsearch.indexing.pipeline import BuildResult, build_index
    from qtsearch.indexing.ray_engine import RayOptions, build_on
    from qtsearch.lifecycle.inputs import Source
    from qtsearch.search.filters import Filter

__all__ = ["BESIDE_EMBED", "BUILD_OPTIONS", "FLAT_MAX", "PARTITIONED", "SQ8_MAX", "STAGES",
           "WHITEN", "AddResult", "DeleteResult", "IndexConfig", "RayOptions", "add_to_index",
           "build_folder", "build_index", "build_on", "delete_condition", "delete_from_index",
           "split_option", "total_seconds"]

#: Where each writer lives.
_LAZY = {"AddResult": "qtsearch.indexing.append", "add_to_index": "qtsearch.indexing.append",
         "split_option": "qtsearch.indexing.append",
         "DeleteResult": "qtsearch.indexing.delete",
         "delete_from_index": "qtsearch.indexing.delete",
         "build_index": "qtsearch.indexing.pipeline",
         "RayOptions": "qtsearch.indexing.ray_engine", "build_on": "qtsearch.indexing.ray_engine"}


__getattr__ = lazy_names(__name__, _LAZY)


def delete_condition(index: Path, where: list[str]) -> Filter:
    """The rows `qtsearch delete --where COLUMN=VALUE …` names, as a condition on the index's
    own columns; a missing index fails with its own error before a bad column does."""
    from qtsearch.index.manifest import read_manifest
    from qtsearch.index.names import META_FILE
    from qtsearch.index.store import MetadataStore
    from qtsearch.search.filters import make_filter, parse_where

    filters = parse_where(where)
    read_manifest(index)
    with MetadataStore.open(index / META_FILE) as store:
        return make_filter(filters, store.columns())


def build_folder(source: Source, path: str | os.PathLike,
                 model: str | os.PathLike | None = None, *, reporter: Reporter | None = None,
                 wait: float | None = 0.0, **options: Any) -> BuildResult:
    """Build an index of `source` in the folder `path`, as `Index.build` takes them (the
    options are the fields of `IndexConfig`), without opening it: what a runner of many
    indexes does before opening each with one encoder it already holds."""
    from qtsearch.indexing.pipeline import build_index
    from qtsearch.lifecycle.inputs import corpus_files
    from qtsearch.text.records import RecordFields

    unknown = sorted(set(options) - set(BUILD_OPTIONS))
    if unknown:
        raise UsageError(f"Index.build: unknown option {', '.join(unknown)}; the options "
                         f"are {', '.join(BUILD_OPTIONS)}")
    fields = RecordFields(options.get("id_field"), options.get("title_field"),
                          options.get("text_field"))
    with corpus_files(source, bool(options.get("split_sentences")), fields) as corpus:
        config = IndexConfig(corpus=corpus, model=None if model is None else str(model),
                             out=os.fspath(path), **options)
        return build_index(config, reporter, wait=wait)
