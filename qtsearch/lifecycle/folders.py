"""Index folders handled without opening them, beside `Index`: what a runner of many indexes
(the benchmarks, `qtsearch bench`) needs that `Index.build` and `Index.open` would do with a
model load each.

`build_folder` builds as `Index.build` does and leaves the index closed: a runner opens it
afterwards with an encoder it already holds (`query_encoder`, loaded once as `Index.open`
loads one). `folder_manifest` reads a folder's manifest as `Index.info` shows it, so that a
cached build is checked, and a build's figures read, without a model.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qtsearch.core.errors import UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import SentenceEncoder
from qtsearch.encoders.registry import load_encoder
from qtsearch.index.index_folder import folder_bytes
from qtsearch.index.manifest import Manifest
from qtsearch.indexing.build_config import IndexConfig
from qtsearch.indexing.pipeline import BuildResult, build_index
from qtsearch.indexing.state import total_seconds
from qtsearch.lifecycle.inputs import Source, corpus_files
from qtsearch.search.searcher import QUERY_PRECISION
from qtsearch.text.records import RecordFields

__all__ = ["BUILD_OPTIONS", "build_folder", "build_seconds", "folder_bytes", "folder_manifest",
           "query_encoder"]

#: The options of `Index.build` beyond where the corpus is, the model and the folder.
BUILD_OPTIONS = tuple(f.name for f in dataclasses.fields(IndexConfig)
                      if f.name not in ("corpus", "model", "out"))


def build_folder(source: Source, path: str | os.PathLike,
                 model: str | os.PathLike | None = None, *, reporter: Reporter | None = None,
                 wait: float | None = 0.0, **options: Any) -> BuildResult:
    """Build an index of `source` in the folder `path`, as `Index.build` takes them (the
    options are the fields of `IndexConfig`), without opening it."""
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


def folder_manifest(path: str | os.PathLike) -> Manifest:
    """The manifest of the index in `path`, checked as an open checks it; UnusableIndex (a
    QTSearchError) when no whole index is there."""
    return Manifest.read(Path(path))


def build_seconds(manifest: Mapping[str, Any]) -> float:
    """A build's own time from its manifest (`folder_manifest(path).to_dict()`): its stages,
    the index and metadata ones counted once where they ran side by side."""
    return total_seconds(manifest["stages"], manifest["build"]["parallel_stages"])


def query_encoder(model: str | os.PathLike | None = None,
                  device: str = "auto") -> SentenceEncoder:
    """The model (None: the shipped one; or an encoder's name) as `Index.open` loads it for
    queries: pass it as `Index.open(path, model=...)` to open many indexes with one load."""
    return load_encoder(None if model is None else os.fspath(model), device=device,
                        precision=QUERY_PRECISION)
