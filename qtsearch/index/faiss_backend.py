"""FAISS on CPU, with its GPU-heavy steps on a GPU: build (train + add in batches), tune search
parameters, read and write.

The saved index is always a CPU index (faiss I/O is CPU-only). A GPU is used only where it pays:
k-means of the IVF coarse quantizer and the IVF assignment of added vectors (the two
O(n · nlist · d) steps), done with torch (qtsearch/index/gpu.py says why not faiss-gpu).
Everything else (scalar-quantizer and PQ encoding, HNSW graph construction) runs in faiss-cpu.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import faiss
import numpy as np

from qtsearch.core.device import cuda_available
from qtsearch.core.disk import writing
from qtsearch.core.errors import OutputError, UnusableIndex, UsageError
from qtsearch.index.fold import FOLD_FILE, Fold, Folder

if TYPE_CHECKING:  # torch: only builds and searches on a GPU import it
    import torch

log = logging.getLogger("qtsearch")

#: faiss scans a flat index (an IVF's coarse quantizer too) query by query with SIMD below a
#: threshold and by BLAS above it. Older faiss counted queries (default 20), which suits and is
#: kept; newer faiss (1.15 here) counts queries x dimensions (default 128,000:
#: a few hundred queries scanned one by one, many times slower than BLAS on one thread); set
#: here so that a lone query or two of this project's dimensions keep the SIMD scan, ~2x
#: quicker than BLAS for them, and batches from a few queries take BLAS (docs/speed.md, "A
#: lone query to a flat index"). Set once for the process, for search and recall tuning.
OLD_BLAS_THRESHOLD = 20
BLAS_THRESHOLD = 1024
if faiss.cvar.distance_compute_blas_threshold != OLD_BLAS_THRESHOLD:
    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD


def gpu_available() -> bool:
    """True when torch sees a CUDA GPU (the index stage's GPU work runs through torch)."""
    return cuda_available()


def resolve_faiss_device(device: str) -> str:
    """"cuda" or "cpu" for the index stage; "cuda" without a GPU falls back with a warning."""
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--device must be one of auto, cpu, cuda, not {device!r}")
    if device == "cpu":
        return "cpu"
    if gpu_available():
        return "cuda"
    if device == "cuda":
        log.warning("no CUDA GPU visible to torch: building the index on the CPU")
    return "cpu"


def apply_search_params(index: faiss.Index, params: dict[str, Any]) -> None:
    """Apply the manifest's `index_params` (faiss ParameterSpace names: nprobe, efSearch,
    k_factor_rf) to a loaded index, reaching through refine/IVF wrappers."""
    space = faiss.ParameterSpace()
    for name, value in params.items():
        try:
            space.set_index_parameter(index, name, float(value))
        except RuntimeError as e:
            raise UnusableIndex(f"search parameter {name}={value} does not apply to this index "
                              f"({str(e).splitlines()[-1]})") from e


#: Stored vectors read back at a time when reopening a graph to add to it.
ADD_CHUNK = 50_000
#: Query batches up to this size are searched on one OpenMP thread.
FEW_QUERIES = 4


#: An exhaustive index (flat, SQ) this large keeps every thread for a lone query: faiss splits
#: one query's scan over the threads, which pays where memory bandwidth grows with the cores
#: and not where it does not; smaller scans never gained (docs/speed.md, "One faiss thread a
#: query").
PARALLEL_SCAN_ROWS = 200_000


@contextlib.contextmanager
def threads_for(index: faiss.Index, n_queries: int) -> Iterator[None]:
    """faiss on one thread for a few queries: its loops run over the queries, so a lone query
    to a graph, an inverted file or an exhaustive index under PARALLEL_SCAN_ROWS gains nothing
    from more threads, whose spin-wait afterwards held the cores that the next query's
    encoding and a server's other requests needed (docs/speed.md, "One faiss thread a
    query")."""
    if n_queries > FEW_QUERIES or (not searches_per_query(index)
                                   and index.ntotal >= PARALLEL_SCAN_ROWS):
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def is_graph(index: faiss.Index) -> bool:
    return isinstance(faiss.downcast_index(index), faiss.IndexHNSW)


def searches_per_query(index: faiss.Index) -> bool:
    """Whether faiss parallelises this index's search over queries only (HNSW, IVF)."""
    return is_graph(index) or ivf_of(index) is not None


def search_rows(index: faiss.Index, fold: Fold | None, queries: np.ndarray,
                k: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores and row ids [nq, k]: a folded graph's nodes expanded to their rows."""
    with threads_for(index, len(queries)):
        scores, ids = index.search(queries, k)
    return (scores, ids) if fold is None else fold.expand(scores, ids, k)


def open_faiss_index(path: str | os.PathLike, mmap: bool = False) -> faiss.Index:
    """Read an index file; UnusableIndex with one clear line when it is missing or corrupt.

    `mmap=True` maps the vector/code arrays of the file instead of reading them (faiss
    IO_FLAG_MMAP_IFC: flat, scalar-quantizer and HNSW storage, the refine codes of IVF-PQ), so
    opening a multi-GB index takes milliseconds and the pages load on first use. Such an index
    is read-only: adding to it aborts the process inside faiss. Files faiss cannot map are read
    normally.
    """
    p = Path(path)
    if not p.is_file():
        raise UnusableIndex(f"{p}: index file is missing")
    try:
        if mmap:
            with contextlib.suppress(RuntimeError):
                return faiss.read_index(str(p), faiss.IO_FLAG_MMAP_IFC)
        return faiss.read_index(str(p))
    except RuntimeError as e:
        raise UnusableIndex(f"{p}: corrupt or unreadable faiss index "
                          f"({str(e).strip().splitlines()[-1]})") from e


def write_faiss_index(index: faiss.Index, path: Path) -> None:
    """Write a CPU index via a temporary name and rename (never half a file under `path`)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with writing(path, tmp), open(tmp, "wb") as fh:  # a full disk: OSError, and below
            _write_through(index, fh)
        os.replace(tmp, path)
    except RuntimeError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write the index ({str(e).splitlines()[-1]})") from e


def _write_through(index: faiss.Index, fh: BinaryIO) -> None:
    """faiss writes into `fh`, a Python file: faiss's own file writer only prints a failed
    close (the last buffer lost on a full disk) and leaves a short file behind, while Python
    raises the OSError of any write, the last flush included."""
    failed: list[BaseException] = []

    def put(data: bytes) -> int:
        try:
            return fh.write(data)
        except BaseException as e:  # faiss reports it as "py err": keep the real one
            failed.append(e)
            raise

    try:
        faiss.write_index(index, faiss.PyCallbackIOWriter(put))
    except RuntimeError:
        if failed:
            raise failed[0] from None
        raise


def write_with_fold(index: faiss.Index, fold: Fold | None, path: Path) -> None:
    """The index file, and beside it the fold of a graph (a stale one removed)."""
    if fold is not None:
        fold.save(path.parent)
    else:
        (path.parent / FOLD_FILE).unlink(missing_ok=True)
    write_faiss_index(index, path)


def flat_vectors(index: faiss.Index) -> np.ndarray | None:
    """The stored vectors of a flat index as an [n, d] view (no copy; mapped pages stay on
    disk until read), or None for other index types."""
    flat = faiss.downcast_index(index)
    if not isinstance(flat, faiss.IndexFlat):
        return None
    n, d = int(flat.ntotal), int(flat.d)
    return faiss.rev_swig_ptr(flat.get_xb(), n * d).reshape(n, d)


def ivf_of(index: faiss.Index) -> faiss.IndexIVF | None:
    """The IVF part of an index (inside a refine wrapper too), or None."""
    base = faiss.downcast_index(index)
    if isinstance(base, faiss.IndexRefine):
        base = faiss.downcast_index(base.base_index)
    return faiss.try_extract_index_ivf(base)


def _code_arrays(index: faiss.Index) -> list[faiss.IndexFlatCodes]:
    """The parts of an index that keep one code per vector in a growable array: a flat or
    scalar-quantizer index, the storage of an HNSW graph, the refine codes of IVF-PQ."""
    top = faiss.downcast_index(index)
    parts = [top]
    if isinstance(top, faiss.IndexRefine):
        parts += [faiss.downcast_index(top.base_index), faiss.downcast_index(top.refine_index)]
    if isinstance(top, faiss.IndexHNSW):
        parts.append(faiss.downcast_index(top.storage))
    return [p for p in parts if isinstance(p, faiss.IndexFlatCodes)]


class FaissBuilder:
    """Create, train and fill one index from a factory key, on CPU or (partly) GPU.

    Usage: `train(sample)` once (a no-op for flat), `add(batch)` per shard in id order, then
    `write(path)`. Vectors must already be L2-normalised float32. A graph (HNSW) holds each
    distinct vector once (qtsearch.index.fold says why); `fold` maps rows to its nodes.
    """

    def __init__(self, key: str, dim: int, device: str = "cpu",
                 index: faiss.Index | None = None):
        """A new index of factory `key`, or `index` (one read back to add to, see `reopen`)."""
        if index is None:
            try:
                index = faiss.index_factory(dim, key, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as e:
                raise UsageError(f"faiss cannot build index {key!r}: "
                                 f"{str(e).strip().splitlines()[-1]}") from e
        self.index = index
        self.folder = Folder(self._stored) if is_graph(self.index) else None
        # The factory turns on polysemous training for PQ codes: a slow simulated-annealing
        # pass that inner-product search never uses.
        top = faiss.downcast_index(self.index)
        base = faiss.downcast_index(top.base_index) if isinstance(top, faiss.IndexRefine) else top
        if hasattr(base, "do_polysemous_training"):
            base.do_polysemous_training = False
        self.gpu: torch.device | None = None
        if device == "cuda" and gpu_available():
            import torch

            self.gpu = torch.device("cuda")
        self._centroids: torch.Tensor | None = None

    def reserve(self, n: int) -> None:
        """Size the code arrays for `n` vectors before adding: grown add by add, a std::vector
        doubles and copies, so a large build's peak memory would be about twice the index."""
        for part in _code_arrays(self.index):
            part.codes.resize(n * part.code_size)
            part.codes.resize(0)  # keeps the capacity: later adds fill it without copying

    @property
    def needs_training(self) -> bool:
        return not self.index.is_trained

    def train(self, sample: np.ndarray) -> None:
        if self.index.is_trained:
            return
        sample = np.ascontiguousarray(sample, dtype=np.float32)
        ivf = ivf_of(self.index)
        if self.gpu is not None and ivf is not None:
            # k-means of the coarse quantizer on the GPU; a quantizer already holding nlist
            # centroids is kept by faiss, which then trains only the codec on the CPU.
            from qtsearch.index.gpu import spherical_kmeans

            ivf.quantizer.add(spherical_kmeans(sample, ivf.nlist, self.gpu))
        self.index.train(sample)

    @classmethod
    def reopen(cls, path: Path) -> FaissBuilder:
        """The index written at `path`, to add to; a folded graph goes on folding (an index
        written before folding existed stays one node per row)."""
        index = open_faiss_index(path)
        builder = cls("", int(index.d), index=index)
        fold = Fold.load(path.parent, int(index.ntotal))
        builder.folder = None if fold is None else Folder(builder._stored, fold, (
            index.reconstruct_n(lo, min(ADD_CHUNK, index.ntotal - lo))
            for lo in range(0, int(index.ntotal), ADD_CHUNK)))
        return builder

    def _stored(self, nodes: np.ndarray) -> np.ndarray:
        return self.index.reconstruct_batch(np.ascontiguousarray(nodes, dtype=np.int64))

    def add(self, vectors: np.ndarray) -> None:
        x = np.ascontiguousarray(vectors, dtype=np.float32)
        if self.folder is not None:
            x = x[self.folder.assign(x)]
        ivf = ivf_of(self.index)
        if self.gpu is None or ivf is None:
            self.index.add(x)
            return
        # Assign to lists on the GPU; encode and append on the CPU (ids continue from ntotal).
        import torch

        from qtsearch.index.gpu import assign_numpy

        if self._centroids is None:  # the trained quantizer's centroids, copied once
            self._centroids = torch.from_numpy(ivf.quantizer.reconstruct_n(0, ivf.nlist)).to(
                self.gpu)
        assign = assign_numpy(x, self._centroids)
        ivf.add_core(x.shape[0], faiss.swig_ptr(x), None, faiss.swig_ptr(assign))
        top = faiss.downcast_index(self.index)
        if isinstance(top, faiss.IndexRefine):  # what IndexRefine.add does after its base
            top.refine_index.add(x)
            top.ntotal = ivf.ntotal

    @property
    def ntotal(self) -> int:
        """Rows added (graph nodes are fewer where vectors repeat)."""
        return self.folder.rows if self.folder is not None else int(self.index.ntotal)

    @property
    def fold(self) -> Fold | None:
        return self.folder.fold() if self.folder is not None else None

    def write(self, path: Path) -> None:
        write_with_fold(self.index, self.fold, path)


class FaissBackend:
    """A faiss index opened for queries (the `VectorBackend` of qtsearch.index.backend)."""

    def __init__(self, index: faiss.Index, path: Path, fold: Fold | None = None):
        self.index = index
        self.path = path
        self.fold = fold
        self.params: dict[str, Any] = {}

    @classmethod
    def open(cls, path: Path) -> FaissBackend:
        index = open_faiss_index(path, mmap=True)  # read-only use
        return cls(index, path, Fold.load(path.parent, int(index.ntotal)))

    @property
    def d(self) -> int:
        return int(self.index.d)

    @property
    def ntotal(self) -> int:
        """Rows (sentences): a folded graph holds fewer nodes."""
        return self.fold.rows if self.fold is not None else int(self.index.ntotal)

    def set_params(self, params: dict[str, Any]) -> None:
        apply_search_params(self.index, params)
        self.params.update(params)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return search_rows(self.index, self.fold, queries, k)

    def reconstruct(self, ids: np.ndarray) -> np.ndarray | None:
        """Stored vectors by id (decoded codes for quantised storage), or None where faiss
        keeps no per-id vector (IVF-PQ without refine codes)."""
        flat = flat_vectors(self.index)
        if flat is not None:  # a view of the mapped file: no decoding call per id
            return np.asarray(flat[ids], dtype=np.float32)
        nodes = ids if self.fold is None else self.fold.node_of_row[ids]
        try:
            return self.index.reconstruct_batch(np.ascontiguousarray(nodes, dtype=np.int64))
        except RuntimeError:
            return None

    def warm_files(self) -> list[Path]:
        """Files worth reading into the page cache ahead of queries: a flat index is read
        whole by every query anyway, the others are searched by random access."""
        return [] if flat_vectors(self.index) is not None else [self.path]

    def touch_pages(self) -> None:
        """Map every page of an HNSW graph's vectors into this process: the first touch of a
        mapped page faults even when the file is cached (docs/benchmarks.md, "Speed"); and
        index a fold's rows by node."""
        if self.fold is not None:
            self.fold.prepare()
        graph = faiss.downcast_index(self.index)
        if isinstance(graph, faiss.IndexHNSW):
            mapped = flat_vectors(graph.storage)
            if mapped is not None:
                mapped.reshape(-1)[::1024].sum()
