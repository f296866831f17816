"""Opening an index: its model, the dimensions of model, transform and vectors, and its files
read into the page cache."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from qtsearch.core.device import placement
from qtsearch.core.errors import ModelError, UnusableIndex
from qtsearch.encoders.base import FolderEncoder
from qtsearch.encoders.corpus_words import with_corpus_words
from qtsearch.encoders.registry import EXTERNAL_ENCODERS, load_encoder
from qtsearch.index import INDEX_FILE, META_FILE
from qtsearch.index.backend import VectorBackend, open_backend
from qtsearch.index.manifest import Manifest
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import VectorTransform
from qtsearch.search.lexical import LexicalSearch


def model_for(folder: Path, manifest: Manifest,
              model: str | os.PathLike | FolderEncoder | None, device: str,
              precision: str) -> FolderEncoder:
    """The index's own model (or `model`, refused unless its fingerprint is the index's)."""
    info = manifest.model
    if model is not None and not isinstance(model, (str, os.PathLike)):
        encoder = model  # an encoder object, ours or external
    elif model is not None:
        encoder = load_encoder(model, device=device, precision=precision)
    else:
        where = info.path
        if not where:
            raise UnusableIndex(f"{folder}: the manifest names no model; pass a model")
        if where not in EXTERNAL_ENCODERS and not Path(where).exists():
            raise ModelError(f"the model this index was built with is gone ({where}); "
                             "pass the same model with --model")
        encoder = load_encoder(where, device=device, precision=precision)
    expected = info.fingerprint
    if expected and encoder.fingerprint != expected:
        name = "?" if info.name is None else info.name
        raise ModelError(
            f"{folder} was built with model {name} (fingerprint {expected}) "
            f"but {encoder.path} has fingerprint {encoder.fingerprint}: its vectors do not "
            "match this index; use the same model or rebuild the index")
    return with_corpus_words(encoder, folder)  # the rows its build gave its corpus's words


def open_parts(folder: Path, manifest: Manifest, encoder: FolderEncoder, device: str
               ) -> tuple[VectorBackend, MetadataStore, VectorTransform | None,
                          LexicalSearch | None]:
    """The index's vectors, metadata store, fitted transform and lexical search (None: the
    index has no BM25 files), checked against one another and against `encoder`."""
    transform = VectorTransform.load(folder)
    # the device asked for, not the encoder's: a numpy encoder still searches a flat
    # index on the GPU
    backend = open_backend(folder / INDEX_FILE, placement(device))
    check_dims(folder, manifest, encoder, backend, transform)
    store = MetadataStore.open(folder / META_FILE, readonly=True)
    rows = store.count()
    if rows != backend.ntotal:
        store.close()
        raise UnusableIndex(f"{folder}: the vector index holds {backend.ntotal:,} vectors "
                            f"but the metadata {rows:,} rows; rebuild the index")
    return backend, store, transform, LexicalSearch.open(folder / META_FILE, rows)


def check_dims(folder: Path, manifest: Manifest, encoder: FolderEncoder,
               backend: VectorBackend, transform: VectorTransform | None) -> None:
    """Model -> transform -> index dimensions must chain (the manifest's `dim` is the
    index's, after the transform); UnusableIndex naming all of them otherwise."""
    dim = manifest.dim
    model_dim = transform.in_dim if transform is not None else dim
    if backend.d != dim or encoder.dim != model_dim or (
            transform is not None and transform.out_dim != dim):
        fitted = f", transform {transform.in_dim}->{transform.out_dim}" if transform else ""
        raise UnusableIndex(f"{folder}: dimension mismatch (manifest {dim}, vector index "
                          f"{backend.d}, model {encoder.dim}{fitted}); rebuild the index")


def read_through(path: Path, chunk: int = 1 << 26) -> None:
    """Read a file once, discarding the bytes, to pull it into the OS page cache."""
    with contextlib.suppress(OSError), open(path, "rb", buffering=0) as fh:
        while fh.read(chunk):
            pass
