"""Rows taken out of a faiss index, the rows kept renumbered 0..n-1 in their order: what
`qtsearch delete` and `add --upsert` do to the vectors (qtsearch.indexing.delete does the rest).

No vector is embedded again and no quantizer trained again. Exhaustive indexes (flat, scalar
quantizer) and the refine codes of IVF-PQ drop the codes in place (faiss shifts the later ones
down). An inverted file stores an explicit id beside each code: the removed ones go, the others
are renumbered in place. An HNSW graph cannot lose nodes, so it is rebuilt from the stored
vectors of the nodes still in use (flat storage gives them back exactly; a scalar quantizer's
decoded vector encodes to the same code), and its fold (qtsearch.index.fold) is renumbered.
"""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from qtsearch.index.faiss_backend import (
    ADD_CHUNK,
    is_graph,
    open_faiss_index,
    write_with_fold,
)
from qtsearch.index.fold import Fold


def keep_rows(src: Path, out: Path, keep: np.ndarray) -> int:
    """Write to `out` (and its fold beside it) the index file `src` holding only the rows where
    the boolean mask `keep` is true, renumbered in order; returns the rows kept."""
    index = open_faiss_index(src)  # read whole, not mapped: it is edited in memory
    fold = Fold.load(src.parent, int(index.ntotal))
    rows = fold.rows if fold is not None else int(index.ntotal)
    if len(keep) != rows:
        raise ValueError(f"{src}: {rows} rows, a mask of {len(keep)}")
    if is_graph(index):
        index, fold = _rebuild_graph(index, fold, keep)
    else:
        _remove(index, np.flatnonzero(~keep), np.cumsum(keep) - 1)
    write_with_fold(index, fold, out)
    return int(keep.sum())


def _remove(index: faiss.Index, drop: np.ndarray, new_id: np.ndarray) -> int:
    """Remove the rows `drop` from `index` in place; `new_id[old]` is a kept row's new id."""
    top = faiss.downcast_index(index)
    if isinstance(top, faiss.IndexRefine):
        n = _remove(top.base_index, drop, new_id)
        _remove(top.refine_index, drop, new_id)
        top.ntotal = n
        return n
    selector = faiss.IDSelectorBatch(np.ascontiguousarray(drop, dtype=np.int64))
    ivf = faiss.try_extract_index_ivf(top)
    if ivf is None:  # one code per row in id order: faiss renumbers as it removes
        top.remove_ids(selector)
        return int(top.ntotal)
    ivf.remove_ids(selector)
    lists = ivf.invlists
    for number in range(ivf.nlist):
        size = lists.list_size(number)
        if size:  # the list's ids, a view of faiss's own array: renumbered where they lie
            ids = faiss.rev_swig_ptr(lists.get_ids(number), size)
            ids[:] = new_id[ids]
    return int(ivf.ntotal)


def _rebuild_graph(index: faiss.Index, fold: Fold | None,
                   keep: np.ndarray) -> tuple[faiss.Index, Fold | None]:
    """A graph of the nodes the kept rows use, in their order, with the same parameters
    (M, efConstruction, efSearch, trained storage), and the kept rows' fold onto it."""
    node_of_row = fold.node_of_row if fold is not None else np.arange(len(keep))
    nodes = np.unique(node_of_row[keep])  # ascending: the nodes keep their order
    graph = faiss.clone_index(index)
    graph.reset()  # empties the links and the storage, keeps the parameters and training
    for lo in range(0, len(nodes), ADD_CHUNK):
        graph.add(index.reconstruct_batch(nodes[lo:lo + ADD_CHUNK]))
    if fold is None:
        return graph, None
    return graph, Fold(np.searchsorted(nodes, node_of_row[keep]))
