"""An index filled in parts and merged (the autofaiss pattern): the driver trains the index once
and writes it empty; each worker adds one shard of vectors to a copy of it, with the shard's
global ids, and writes the filled part; the driver merges the parts in shard order.

The merged index equals the one filled in a single process: an inverted list holds its entries
in the order they were added, and flat or scalar-quantizer codes (also the refine codes of
IVF-PQ) are appended part after part, so ids and codes come out the same. Graph indexes (HNSW)
cannot be merged: `mergeable` says so and the caller adds their vectors itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import faiss
import numpy as np

from qtsearch.index.faiss_backend import gpu_available, ivf_of, open_faiss_index, write_faiss_index


def mergeable(index: faiss.Index) -> bool:
    """Whether parts of this index can be filled apart and merged: inverted files (with or
    without refine codes) and flat or scalar-quantizer codes, not graphs."""
    top = faiss.downcast_index(index)
    return ivf_of(index) is not None or (
        isinstance(top, faiss.IndexFlatCodes) and not isinstance(top, faiss.IndexHNSW))


def write_trained(index: faiss.Index, folder: Path, salt: bytes = b"") -> Path:
    """Write the trained, empty index as `trained-<tag>.faiss`, the tag a hash of the index and
    `salt` (whatever else the parts depend on), so parts filled from another training are never
    mistaken for this one's."""
    tag = hashlib.sha256(faiss.serialize_index(index).tobytes() + salt).hexdigest()[:12]
    path = folder / f"trained-{tag}.faiss"
    if not path.exists():
        write_faiss_index(index, path)
    return path


def part_path(trained: Path, shard: int) -> Path:
    """Where the part of `shard` filled from `trained` goes."""
    tag = trained.stem.removeprefix("trained-")
    return trained.with_name(f"part-{tag}-{shard:05d}.faiss")


def stale_files(trained: Path) -> list[Path]:
    """Trained indexes and parts of other trainings in the same folder."""
    tag = trained.stem.removeprefix("trained-")
    return [p for pattern in ("trained-*.faiss", "part-*.faiss")
            for p in trained.parent.glob(pattern) if f"-{tag}" not in p.name]


def fill_part(trained: Path, vectors: np.ndarray, first_id: int, out: Path,
              gpu: bool = False) -> None:
    """Add `vectors` (ids first_id, first_id + 1, …) to a copy of the trained index and write
    it to `out` (a part that exists is whole: written to a temporary name and renamed). With
    `gpu`, IVF list assignment runs on the GPU, as in FaissBuilder.add."""
    index = open_faiss_index(trained)
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    ivf = ivf_of(index)
    if ivf is None:  # flat or SQ codes: ids are positions, kept by merging in shard order
        index.add(x)
    else:
        ids = np.arange(first_id, first_id + x.shape[0], dtype=np.int64)
        if not (gpu and gpu_available()):
            ivf.add_with_ids(x, ids)
        else:
            import torch  # only a GPU part needs it (its import takes seconds)

            from qtsearch.index.gpu import assign_numpy

            centroids = torch.from_numpy(ivf.quantizer.reconstruct_n(0, ivf.nlist)).to("cuda")
            assign = assign_numpy(x, centroids)
            ivf.add_core(x.shape[0], faiss.swig_ptr(x), faiss.swig_ptr(ids),
                         faiss.swig_ptr(assign))
        top = faiss.downcast_index(index)
        if isinstance(top, faiss.IndexRefine):  # what IndexRefine.add does after its base
            top.refine_index.add(x)
            top.ntotal = ivf.ntotal
    write_faiss_index(index, out)


def merge_parts(index: faiss.Index, parts: Iterable[Path]) -> None:
    """Append the parts, in order, to `index` (trained, as the parts were): inverted lists
    through IndexIVF.merge_from (ids as the parts hold them), codes array after array (not
    merge_from, which refuses an IndexFlat from the factory and its IndexFlatIP read back)."""
    top = faiss.downcast_index(index)
    for path in parts:
        loaded = open_faiss_index(path)  # owns the index: a downcast view alone would not
        part = faiss.downcast_index(loaded)
        if ivf_of(top) is not None:
            ivf_of(top).merge_from(ivf_of(part), 0)
        if isinstance(top, faiss.IndexRefine):
            _append_codes(top.refine_index, part.refine_index)
            top.ntotal = ivf_of(top).ntotal
        elif ivf_of(top) is None:
            _append_codes(top, part)


def _append_codes(index: faiss.Index, part: faiss.Index) -> None:
    """Add the codes of flat or scalar-quantizer `part` to `index` as they are."""
    target, source = faiss.downcast_index(index), faiss.downcast_index(part)
    n = int(source.ntotal)
    if n:
        target.add_sa_codes(faiss.vector_to_array(source.codes).reshape(n, -1))
