"""Derived builds: another index type from the vectors of an exact (flat) index, without reading
or embedding the corpus again (embedding is by far the costliest stage of a build on the CPU).
The source's vectors are already through its fitted transform, so the
transform files come along with the metadata and the BM25 files unchanged."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from qtsearch.core.config import save_config
from qtsearch.core.errors import UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.corpus_words import CORPUS_WORDS
from qtsearch.index import bm25
from qtsearch.index.faiss_backend import open_faiss_index
from qtsearch.index.index_folder import folder_bytes, swap_in
from qtsearch.index.manifest import Manifest, compose_manifest, now, write_manifest
from qtsearch.index.names import CONFIG_FILE, INDEX_FILE, META_FILE, PARQUET_FILE
from qtsearch.index.transform import TRANSFORM_FILE, TRANSFORM_JSON
from qtsearch.indexing.index_stage import build_fields, manifest_fields
from qtsearch.indexing.pipeline import Builder, BuildResult, IndexConfig
from qtsearch.indexing.state import STAGES, STATE_FILE


class _FromIndex(Builder):
    """A build whose vectors come from an existing flat index instead of embedded shards:
    the index stage is the builder's own, so a derived index is the one `build-index --index
    TYPE --fit <the source's fit>` would make."""

    def __init__(self, source: Path, config: IndexConfig, reporter: Reporter | None):
        super().__init__(config, reporter)
        self.source = source
        self.source_manifest = Manifest.read(source)
        if self.source_manifest.index_type != "flat":
            raise UsageError(f"{source}: is a {self.source_manifest.index_type} index; "
                             f"only a flat index holds the exact vectors to build from")
        self.vectors = open_faiss_index(source / INDEX_FILE, mmap=True)  # only read from

    def _vectors(self) -> Iterator[np.ndarray]:
        n, step = int(self.vectors.ntotal), self.config.shard_size
        for lo in range(0, n, step):
            yield self.vectors.reconstruct_n(lo, min(step, n - lo))

    def _run(self) -> BuildResult:  # under the writer lock: Builder.run
        self._check_output()
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if self.partial.exists():
            shutil.rmtree(self.partial)
        self.partial.mkdir()
        n, step = int(self.vectors.ntotal), self.config.shard_size
        self.state.update({"read": {"count": n, "shards": -(-n // step)}, "index": None,
                           "stages": dict.fromkeys(STAGES, 0.0)})
        with self.reporter:
            self._index(self.source_manifest.dim)
        t0 = time.perf_counter()
        for name in (META_FILE, PARQUET_FILE, TRANSFORM_FILE, TRANSFORM_JSON, CORPUS_WORDS):
            if (self.source / name).is_file():
                shutil.copyfile(self.source / name, self.partial / name)
        if bm25.exists(self.source):  # the same rows: the same BM25 files
            shutil.copytree(self.source / bm25.FOLDER, self.partial / bm25.FOLDER)
        else:  # a source built before them gets them here
            bm25.write_for(self.partial, self.partial / META_FILE)
        self.state.timed("metadata", t0)
        info, src = self.state["index"], self.source_manifest
        manifest = compose_manifest(
            src.to_dict(), **manifest_fields(info), stages=dict(self.state["stages"]),
            created=now(),
            build={**src.build, **build_fields(info),
                   "shard_size": self.config.shard_size,
                   "derived_from": {"path": str(self.source.resolve()),
                                    "stages": src.stages}})
        save_config(self.config, self.partial / CONFIG_FILE)
        write_manifest(self.partial, manifest)
        (self.partial / STATE_FILE).unlink()
        swap_in(self.partial, self.out)
        return BuildResult(self.out, manifest, [], folder_bytes(self.out))


def build_from_index(source: str | os.PathLike, out: str | os.PathLike, index_type: str,
                     device: str = "auto", overwrite: bool = False,
                     reporter: Reporter | None = None) -> BuildResult:
    """Build an `index_type` index folder at `out` from the vectors and metadata of the flat
    index `source`. Its manifest records the source under build.derived_from; its stages hold
    only the work done here."""
    folder = Path(source)
    manifest = Manifest.read(folder)
    config = IndexConfig(corpus=[c["path"] for c in manifest.corpus],
                         model=manifest.model.path, out=str(out), index=index_type,
                         split_sentences=manifest.split_sentences,
                         device=device, parquet=(folder / PARQUET_FILE).is_file(),
                         shard_size=int(manifest.build.get("shard_size", 50_000)),
                         overwrite=overwrite, fit=manifest.fit)
    if Path(out).resolve() == folder.resolve():
        raise UsageError(f"{out}: the derived index must go to another folder than its source")
    return _FromIndex(folder, config, reporter).run()
