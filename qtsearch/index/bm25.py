"""Exact BM25 over an index's rows: an inverted file of numpy arrays in the index folder.

SQLite's FTS5 bm25() scores every row a query matches one by one, so ranking every match of an
OR of words over a million sentences is too slow for a query, and the FTS5 leg
(qtsearch.search.lexical) keeps only words within a row budget. Here a term's postings are two
contiguous arrays (rows, and the term-frequency part of BM25 precomputed per posting), memory-
mapped; a query multiplies each of its terms' slices by the term's idf and adds them into a
dense score array: numpy work proportional to the postings of the query's terms, no budget,
every matching row scored (benchmarks/lexical_engines.py and docs/lexical.md compare it with
bm25s, tantivy and FTS5).

BM25 as in Lucene: score(q, d) = Σ_t idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len(d)/avglen))
with idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5)), k1 = 1.2, b = 0.75; N counts every row.
Words are letters and digits, case-folded, diacritics removed, English stop-words dropped
(qtsearch.text.stopwords) and Snowball-stemmed (PyStemmer), at build and query time alike
(qtsearch.text.terms).

Files, in the folder `bm25/` of the index folder:
  terms.txt    the terms, one a line, in UTF-8 byte order: line t is term t
  term_offsets.npy  int64 [terms + 1]: where line t starts in terms.txt (a query finds its
               terms by binary search in the memory-mapped file: no table to load on open)
  indptr.npy   int64 [terms + 1]: term t's postings are [indptr[t], indptr[t+1])
  rows.npy     int32 [postings]: row ids, ascending within a term
  tfs.npy      uint16 [postings]: occurrences of the term in the row (kept for `add`)
  weights.npy  float32 [postings]: tf·(k1+1) / (tf + k1·(1 − b + b·len/avglen))
  lengths.npy  int32 [rows]: the row's terms (stop-words not counted)
  info.json    format, rows, k1, b, avglen
`add` rewrites them all (new rows change avglen and so every weight), reading only the new rows'
text (its cost: docs/lexical.md, "Where it lives"); `delete` filters the postings
(`keep_rows`).
"""

from __future__ import annotations

import json
import mmap
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from qtsearch.core.device import cpus
from qtsearch.core.disk import writing
from qtsearch.core.errors import DamagedIndex, UnusableIndex
from qtsearch.core.sorted_lines import find_line, line_blob
from qtsearch.index.bm25_terms import (
    CHUNK,
    PARALLEL_ROWS,
    ChunkTerms,
    analysed,
    analysed_store,
    invert,
    stoppable,
    store_count,
    store_rows,
)
from qtsearch.text.terms import Analyzer

FOLDER = "bm25"
#: Term ids an opened index remembers (`term_id`), then forgets all and starts again.
TERMS_KEPT = 100_000
FORMAT = 2
K1 = 1.2
B = 0.75
FILES = ("terms.txt", "term_offsets.npy", "indptr.npy", "rows.npy", "tfs.npy", "weights.npy",
         "lengths.npy", "info.json")


@dataclass
class _Postings:
    """Postings in term order, rows ascending within a term."""

    terms: list[str]
    indptr: np.ndarray
    rows: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray


def _write(folder: Path, p: _Postings) -> None:
    """Write the files into `folder`/bm25 through a temporary folder renamed in place."""
    n = len(p.lengths)
    avglen = float(p.lengths.sum()) / n if n else 0.0
    norm = K1 * (1.0 - B + B * p.lengths.astype(np.float64) / max(avglen, 1e-9))
    tf = p.tfs.astype(np.float64)
    weights = (tf * (K1 + 1.0) / (tf + norm[p.rows])).astype(np.float32)
    out = folder / FOLDER
    tmp = folder / (FOLDER + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    blob, offsets = line_blob(p.terms)
    with writing(tmp / "terms.txt"):
        (tmp / "terms.txt").write_bytes(blob)
    arrays = {"term_offsets.npy": offsets, "indptr.npy": p.indptr.astype(np.int64),
              "rows.npy": p.rows.astype(np.int32), "tfs.npy": p.tfs.astype(np.uint16),
              "weights.npy": weights, "lengths.npy": p.lengths.astype(np.int32)}
    for name, array in arrays.items():
        with writing(tmp / name):  # a full disk: one line naming the file
            np.save(tmp / name, array)
    with writing(tmp / "info.json"):
        (tmp / "info.json").write_text(json.dumps(
            {"format": FORMAT, "rows": n, "k1": K1, "b": B, "avglen": avglen,
             "terms": len(p.terms), "postings": len(p.rows)}), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def _postings(vocab: dict[str, int], term_ids: np.ndarray, rows: np.ndarray, tfs: np.ndarray,
              lengths: np.ndarray) -> _Postings:
    """Postings in the order of the terms' UTF-8 bytes (str order is code-point order, the
    same), from (term id, row, tf) triples whose rows ascend within each term."""
    terms = sorted(vocab)
    remap = np.empty(len(vocab), dtype=np.int32)
    remap[np.fromiter((vocab[t] for t in terms), dtype=np.int64, count=len(terms))] = \
        np.arange(len(terms))
    term_ids = remap[term_ids]
    order = np.argsort(term_ids, kind="stable")  # keeps rows ascending within a term
    counts = np.bincount(term_ids, minlength=len(terms))
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return _Postings(terms, indptr, rows[order], tfs[order], lengths)


def build(folder: Path, rows: Iterable[tuple[int, str]]) -> int:
    """Write the BM25 files of `folder` from all its rows, (id, text) in id order from 0;
    returns the number of rows."""
    return build_from(folder, analysed(rows, 0))


def build_from(folder: Path, parts: Iterable[ChunkTerms]) -> int:
    """`build` from the rows analysed (qtsearch.index.bm25_terms), in row order from 0."""
    vocab: dict[str, int] = {}
    term_ids, row_ids, tfs, lengths = invert(parts, vocab, 0)
    _write(folder, _postings(vocab, term_ids, row_ids, tfs, lengths))
    return len(lengths)


def exists(folder: Path) -> bool:
    return all((folder / FOLDER / name).is_file() for name in FILES)


def append(folder: Path, rows: Iterable[tuple[int, str]]) -> int:
    """Add rows (id, text; ids continuing the index's) to `folder`'s BM25 files, keeping every
    score exact; returns the number of rows added."""
    return _append(folder, lambda first_row: analysed(rows, first_row))


def _append(folder: Path, parts_from: Callable[[int], Iterable[ChunkTerms]]) -> int:
    """`append` of the rows `parts_from(the files' row count)` gives analysed."""
    old = Bm25Index.open(folder)
    if old is None:
        raise UnusableIndex(f"{folder}: no BM25 files to add to")
    vocab = {t: i for i, t in enumerate(old.terms)}
    new_terms, new_rows, new_tfs, new_lengths = invert(parts_from(old.count), vocab, old.count)
    old_terms = np.repeat(np.arange(len(old.indptr) - 1, dtype=np.int64), np.diff(old.indptr))
    # old postings first: within a term, rows stay ascending through the stable sort
    p = _postings(vocab, np.concatenate([old_terms, new_terms]),
                  np.concatenate([np.asarray(old.rows, dtype=np.int64), new_rows]),
                  np.concatenate([np.asarray(old.tfs, dtype=np.int64), new_tfs]),
                  np.concatenate([np.asarray(old.lengths), new_lengths]))
    del old  # its memory maps, before the files under them are replaced
    _write(folder, p)
    return len(new_lengths)


def keep_rows(folder: Path, keep: np.ndarray) -> int:
    """Drop from `folder`'s BM25 files the rows where the mask `keep` is false, renumbering the
    others in order (`delete`): every score stays exact, the weights recomputed from the rows
    left, far faster than indexing the rows anew. Returns the rows."""
    old = Bm25Index.open(folder)
    if old is None or old.count != len(keep):
        raise UnusableIndex(f"{folder}: no BM25 files of {len(keep):,} rows to delete from")
    rows = np.asarray(old.rows, dtype=np.int64)
    held = keep[rows]
    counts = np.bincount(np.repeat(np.arange(len(old.indptr) - 1), np.diff(old.indptr))[held],
                         minlength=len(old.indptr) - 1)
    indptr = np.zeros(int((counts > 0).sum()) + 1, dtype=np.int64)
    np.cumsum(counts[counts > 0], out=indptr[1:])
    p = _Postings([t for t, n in zip(old.terms, counts, strict=True) if n], indptr,
                  (np.cumsum(keep) - 1)[rows[held]], np.asarray(old.tfs)[held],
                  np.asarray(old.lengths)[keep])
    del old, rows  # the memory maps, before the files under them are replaced
    _write(folder, p)
    return len(p.lengths)


def write_for(folder: Path, db: Path, first_id: int = 0,
              stop: threading.Event | None = None) -> int:
    """Bring an index folder's BM25 files up to its metadata store `db`: the rows from
    `first_id` on are added to files that cover exactly the rows before it, otherwise (no files,
    files of another size, `first_id` 0) every row is indexed anew. Returns the rows indexed.
    Many rows are analysed by a worker process per core (qtsearch.index.bm25_terms). Once
    `stop` is set, the next chunk raises qtsearch.core.errors.Stopped."""
    if first_id > 0 and exists(folder):
        old = Bm25Index.open(folder)
        if old is not None and old.count == first_id:
            del old
            return _append(folder, lambda first_row: stoppable(_store_parts(db, first_row),
                                                               stop))
    return build_from(folder, stoppable(_store_parts(db, 0), stop))


def _store_parts(db: Path, first_id: int) -> Iterable[ChunkTerms]:
    """A store's rows from `first_id` on, analysed here, or by workers where they are many
    and there is a core for each."""
    count = store_count(db, first_id)
    workers = min(cpus(), -(-count // CHUNK))
    if count < PARALLEL_ROWS or workers < 2:
        return analysed(store_rows(db, first_id), first_id)
    return analysed_store(db, first_id, count, workers)


class Bm25Index:
    """An index folder's BM25 files, memory-mapped; `top` is safe from many threads."""

    def __init__(self, path: Path):
        """Open the files, checking what costs no more than reading their headers and the two
        term tables (a few ms at a million terms): the info, every array's type and length,
        and that the tables ascend from 0 to the end of what they index. DamagedIndex, naming
        the file, where one is off (a reader's `check` of what it can afford)."""
        self.path = path
        info = self._info()
        self.count, terms, postings = info["rows"], info["terms"], info["postings"]
        self.k1, self.b = float(info["k1"]), float(info["b"])
        self.avglen = float(info["avglen"])  # terms a row holds on average
        blob = path / "terms.txt"
        self.indptr = self._array("indptr.npy", np.int64, terms + 1, postings)
        self.offsets = self._array("term_offsets.npy", np.int64, terms + 1,
                                   blob.stat().st_size)
        self.rows = self._array("rows.npy", np.int32, postings)
        self.tfs = self._array("tfs.npy", np.uint16, postings)
        self.weights = self._array("weights.npy", np.float32, postings)
        self.lengths = self._array("lengths.npy", np.int32, self.count)
        self.analyzer = Analyzer()
        self._term_ids: dict[str, int | None] = {}  # terms looked up, see term_id
        with open(blob, "rb") as fh:  # an empty file cannot be mapped (a corpus of stop-words)
            self._blob = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) \
                if blob.stat().st_size else b""

    def damaged(self, name: str, why: str) -> DamagedIndex:
        return DamagedIndex(f"{self.path / name}: damaged BM25 file ({why}); rebuild the index")

    def _info(self) -> dict[str, Any]:
        try:
            info = json.loads((self.path / "info.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:  # UnicodeDecodeError and JSONDecodeError included
            raise self.damaged("info.json", str(e).splitlines()[0]) from None
        if not isinstance(info, dict):
            raise self.damaged("info.json", "not a JSON object")
        if info.get("format") != FORMAT:
            raise UnusableIndex(f"{self.path}: BM25 files of format {info.get('format')!r}, this "
                              f"qtsearch reads {FORMAT}; rebuild the index")
        for key in ("rows", "terms", "postings"):
            if type(info.get(key)) is not int or info[key] < 0:
                raise self.damaged("info.json", f"{key} {info.get(key)!r}")
        for key in ("k1", "b", "avglen"):
            if type(info.get(key)) not in (int, float) or not np.isfinite(info[key]):
                raise self.damaged("info.json", f"{key} {info.get(key)!r}")
        return info

    def _array(self, name: str, dtype: type, length: int, end: int | None = None) -> np.ndarray:
        """A memory-mapped array of `dtype` and `length`; `end`: a table ascending from 0 to
        `end` (where each term's postings or text start)."""
        try:
            array = np.load(self.path / name, mmap_mode="r")
        except (OSError, ValueError, SyntaxError, TokenError) as e:
            raise self.damaged(name, str(e).splitlines()[0][:200]) from None
        if array.dtype != dtype or array.shape != (length,):
            raise self.damaged(name, f"{array.dtype} {array.shape} where {np.dtype(dtype)} "
                                     f"({length},) belongs")
        if end is not None and (array[0] != 0 or array[-1] != end
                                or bool((np.diff(array) < 0).any())):
            raise self.damaged(name, f"not a table ascending from 0 to {end}")
        # a plain array over the same mapping: a slice or an item of an np.memmap goes through
        # Python-level hooks, a cost a query pays at every posting list and binary-search step
        return np.asarray(array)

    @classmethod
    def open(cls, folder: Path) -> Bm25Index | None:
        """The BM25 files of an index folder; None for an index built before them."""
        return cls(folder / FOLDER) if exists(folder) else None

    @property
    def terms(self) -> list[str]:
        return (self.path / "terms.txt").read_text(encoding="utf-8").splitlines()

    def term_id(self, term: str) -> int | None:
        """The id of a term, None if no row holds it: a binary search of terms.txt (~20
        steps at a million terms), remembered: later queries meet the same terms again, and
        a hybrid query looks its terms up twice (`LexicalSearch.stop_words_only`, then its
        search)."""
        kept = self._term_ids
        found = kept.get(term, -1)
        if found == -1:
            found = find_line(self._blob, self.offsets, term)
            if len(kept) >= TERMS_KEPT:  # a long-running server meets ever new terms
                kept.clear()
            kept[term] = found
        return found

    def ids_of(self, terms: list[str]) -> list[int]:
        """The ids of the terms some row holds (the others are left out)."""
        return [i for i in map(self.term_id, terms) if i is not None]

    def warm(self) -> None:
        """Read the term table and offsets into the page cache (a warm-up thread)."""
        _ = bytes(self._blob[:]), np.asarray(self.offsets).sum()

    def idf(self, term_id: int) -> float:
        df = int(self.indptr[term_id + 1] - self.indptr[term_id])
        return float(np.log1p((self.count - df + 0.5) / (df + 0.5)))

    def _postings(self, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows and weights of postings start…end, checked as they are read (what the
        open could not afford to scan): rows within the index, weights finite."""
        rows = np.asarray(self.rows[start:end])
        weights = np.asarray(self.weights[start:end], dtype=np.float32)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= self.count):
            raise self.damaged("rows.npy", f"a row id outside 0…{self.count - 1}")
        if not np.isfinite(weights).all():
            raise self.damaged("weights.npy", "a weight that is not a finite number")
        return rows, weights

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, stop-words left out."""
        return list(dict.fromkeys(self.analyzer.terms(text)))

    def top(self, terms: list[str], k: int,
            allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """`top_ids` of the terms some row holds."""
        return self.top_ids(self.ids_of(terms), k, allowed)

    def top_ids(self, ids: list[int], k: int, allowed: np.ndarray | None = None,
                boosts: Sequence[float] | None = None) -> list[tuple[int, float]]:
        """(row, BM25) of the best `k` rows for the OR of the terms `ids`, best first, ties by
        row; every row holding one of them is scored. `allowed`: sorted row ids a filter lets
        through (None: all). `boosts`: a positive weight a term, its part of a row's score
        multiplied by it (None: 1 each, BM25 itself)."""
        if not ids or k < 1:
            return []
        idfs = [self.idf(t) for t in ids]
        if boosts is not None:
            idfs = [i * b for i, b in zip(idfs, boosts, strict=True)]
        spans = [(int(self.indptr[t]), int(self.indptr[t + 1]), i)
                 for t, i in zip(ids, idfs, strict=True)]
        postings = [self._postings(s, e) for s, e, _ in spans]
        if len(spans) == 1:
            cand, weights = postings[0]
            vals = weights * np.float32(spans[0][2])
        else:
            acc = np.zeros(self.count, dtype=np.float32)
            for (rows, weights), (_, _, idf) in zip(postings, spans, strict=True):
                acc[rows] += weights * np.float32(idf)  # a row occurs once in a term's postings
            cand = np.concatenate([rows for rows, _ in postings])
            vals = acc[cand]
        if allowed is not None:
            mask = np.zeros(self.count, dtype=bool)
            mask[allowed[allowed < self.count]] = True
            keep = mask[cand]
            cand, vals = cand[keep], vals[keep]
        # a row is in `cand` once per term it holds, so the best k rows are among the best
        # k·terms entries; every entry tied with the last one is kept, so ties break by row
        m = k * len(spans)
        if len(vals) > m:
            threshold = np.partition(vals, len(vals) - m)[len(vals) - m]
            sel = vals >= threshold
            cand, vals = cand[sel], vals[sel]
        cand, first = np.unique(cand, return_index=True)
        vals = vals[first]
        order = np.lexsort((cand, -vals))[:k]
        return [(int(cand[i]), float(vals[i])) for i in order]
