"""`qtsearch add`: append sentences to an existing index with the index's own model, on a copy
that replaces the index only when complete."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.batching import chunks
from qtsearch.core.errors import ModelError, UnusableIndex
from qtsearch.core.progress import Reporter
from qtsearch.encoders.corpus_words import with_corpus_words
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import bm25
from qtsearch.index.faiss_backend import FaissBuilder
from qtsearch.index.index_folder import file_checksum, swap_in, working_copy
from qtsearch.index.integrity import require_whole
from qtsearch.index.lock import real_folder, writer_lock
from qtsearch.index.manifest import Manifest, compose_manifest, now, read_manifest, write_manifest
from qtsearch.index.names import INDEX_FILE, META_FILE, PARQUET_FILE
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import VectorTransform
from qtsearch.indexing.delete import compact, held_files, keep_mask, matching_rows, whole_count
from qtsearch.text.read_options import ReadOptions, check_format
from qtsearch.text.reader import is_wikiextractor, list_files, read_sentences
from qtsearch.text.records import is_records
from qtsearch.text.sentence import ARTICLE_FIELDS


@dataclass
class AddResult:
    path: Path
    added: int
    count: int
    seconds: float
    skipped: list[str] = field(default_factory=list)  # one note per file skipped as a duplicate
    replaced: int = 0  # rows of records the added ones replaced (upsert)


def split_option(manifest: Manifest, split_sentences: bool | None,
                 corpus: Sequence[str | os.PathLike] = (),
                 input_format: str = "auto") -> tuple[bool, str]:
    """Whether `add` splits running text into sentences: as asked, or else as the index was
    built (an index of sentences should not get wrapped line fragments); and the line that
    says how the files of `corpus` are read (records and WikiExtractor articles are never
    split by line, so for them the line names their format; no corpus: text files)."""
    built = manifest.split_sentences
    split = built if split_sentences is None else split_sentences
    how = "splitting running text into sentences" if split else "one sentence per line"
    if split_sentences is None:
        other = "--no-split-sentences" if split else "--split-sentences"
        text = f"{how}, as this index was built ({other} to change)"
    else:
        text = f"{how} (as asked; the index was built with" + (
            "" if built else "out") + " --split-sentences)"
    kinds = input_kinds(corpus, input_format) if corpus else ["text"]
    words = manifest.passage_words
    parts = {"records": "records, " + (f"in passages of up to {words:,} words" if words else
                                       "one passage a record") + " as this index was built",
             "wikiextractor": "WikiExtractor articles, their titles and sections kept",
             "text": text if kinds == ["text"] else f"text files, {text}"}
    return split, "add: " + "; ".join(parts[k] for k in kinds)


def input_kinds(corpus: Sequence[str | os.PathLike], input_format: str = "auto") -> list[str]:
    """The formats the files of `corpus` are read in (records, wikiextractor, text), each
    once, in the order they first occur, as `read_sentences` tells them apart."""
    kinds: dict[str, None] = {}
    for path in list_files(corpus):
        if input_format == "records" or (input_format == "auto" and is_records(path)):
            kinds["records"] = None
        elif input_format != "text" and is_wikiextractor(path):
            kinds["wikiextractor"] = None
        else:
            kinds["text"] = None
    return list(kinds)


def add_to_index(index_dir: str | os.PathLike, corpus: list[str],
                 split_sentences: bool | None = None, device: str = "auto",
                 batch_size: int = 512, chunk: int = 50_000, reporter: Reporter | None = None,
                 input_format: str = "auto", wait: float | None = 0.0,
                 allow_duplicates: bool = False,
                 on_note: Callable[[str], None] | None = None,
                 upsert: bool = False) -> AddResult:
    """Append the sentences of `corpus` to an existing index (see `_add`), holding the index's
    writer lock (qtsearch.index.lock; `wait` as its `wait`, `on_note` told whom it waits for)
    so that no other build or add of the folder runs meanwhile.

    A file whose sha256 the manifest already records (added or indexed before), or that is
    given twice, is skipped with a note in `AddResult.skipped` unless `allow_duplicates`.
    `upsert`: the rows of every record whose id (doc_id) the new files hold are deleted in
    the same write (`AddResult.replaced` counts them), so a record's new passages replace
    its old ones."""
    folder = real_folder(index_dir)  # a link: the folder it points to
    read_manifest(folder)  # a missing or broken index fails here, before any lock file
    with writer_lock(folder, wait=wait, on_wait=on_note):
        return _add(folder, corpus, split_sentences, device, batch_size, chunk, reporter,
                    input_format, allow_duplicates, upsert)


def duplicates(manifest: Manifest, sums: list[dict[str, Any]]) -> dict[int, str]:
    """Which of the files `sums` (file_checksum's) are already in the index or repeat an
    earlier one: {position: the note that says so}."""
    known = {c.get("sha256"): c.get("path") for c in manifest.corpus}
    notes: dict[int, str] = {}
    for i, c in enumerate(sums):
        if c["sha256"] in known:
            notes[i] = (f"add: {c['path']} skipped: the index already holds this file "
                        f"(sha256 {c['sha256'][:12]}…, as {known[c['sha256']]}); "
                        "--allow-duplicates adds it again")
        else:
            known[c["sha256"]] = c["path"]
    return notes


def _add(folder: Path, corpus: list[str], split_sentences: bool | None, device: str,
         batch_size: int, chunk: int, reporter: Reporter | None, input_format: str,
         allow_duplicates: bool, upsert: bool = False) -> AddResult:
    """Append the sentences of `corpus` to an existing index with the index's own model.

    `split_sentences` None: as the index was built (its manifest); `input_format` as in
    `read_sentences` (WikiExtractor articles keep their metadata, also when added to an index
    built before the article columns). New ids continue after the last one and documents
    after the last document. The work is done on a copy (`<index>.adding/`) that replaces
    the index only when complete.
    """
    t0 = time.perf_counter()
    manifest = Manifest.read(folder)
    split_sentences, _ = split_option(manifest, split_sentences)
    check_format(input_format)
    files = list_files(corpus)
    sums = [file_checksum(f) for f in files]
    skipped = {} if allow_duplicates else duplicates(manifest, sums)
    files = [f for i, f in enumerate(files) if i not in skipped]
    sums = [c for i, c in enumerate(sums) if i not in skipped]
    if not files:  # nothing new: the index stays as it is, not even copied
        return AddResult(folder, 0, manifest.count, time.perf_counter() - t0,
                         list(skipped.values()))
    require_whole(folder, manifest.files, manifest.count)  # before anything is read from its files
    model_path = manifest.model.path
    encoder = load_encoder(model_path, device=device)
    if encoder.fingerprint != manifest.model.fingerprint:
        raise ModelError(f"{model_path}: the model changed since this index was built "
                         f"(fingerprint {encoder.fingerprint} != "
                         f"{manifest.model.fingerprint}); rebuild the index")
    encoder = with_corpus_words(encoder, folder)  # as the build and the queries encode
    transform = VectorTransform.load(folder)  # the index holds vectors fitted at build time
    read_options = replace(manifest.read_options(split_sentences), fmt=input_format)
    keep = _rows_kept(folder, files, read_options) if upsert else None
    replaced = 0 if keep is None else int((~keep).sum())
    corpus_before = manifest.corpus
    with working_copy(folder) as work:
        if keep is not None and replaced:  # the old passages go first (build.delete)
            compact(folder, work, keep)
            corpus_before = held_files(work, corpus_before)
        index = FaissBuilder.reopen(work / INDEX_FILE)
        start = index.ntotal
        with MetadataStore.open(work / META_FILE, readonly=False) as store:
            if store.count() != start:
                raise UnusableIndex(f"{folder}: index holds {start:,} vectors but the metadata "
                                  f"{store.count():,} rows; rebuild the index")
            first_doc = store.max_doc() + 1
            n = start
            sentences = read_sentences([str(f) for f in files], options=read_options)
            with reporter or Reporter() as bars, bars.stage("add", None, "sentences") as adv:
                for batch in chunks(sentences, chunk):
                    vectors = encoder.encode([b.text for b in batch], batch_size,
                                             normalize=True, progress=adv)
                    index.add(transform.apply(vectors) if transform else vectors)
                    store.insert_many((n + k, b.text, b.source, b.line, b.doc + first_doc,
                                       b.position, *(getattr(b, f) for f in ARTICLE_FIELDS))
                                      for k, b in enumerate(batch))
                    n += len(batch)
            full_text = store.has_fts()
            if full_text:  # an index built with the table keeps it whole
                store.fts_fill(start)
            store.checkpoint()
            bm25.write_for(work, work / META_FILE, start)  # every BM25 score stays exact
            if (work / PARQUET_FILE).exists():
                store.to_parquet(work / PARQUET_FILE)
        index.write(work / INDEX_FILE)
        added = {"count": n - start, "seconds": round(time.perf_counter() - t0, 3), "at": now(),
                 **({"replaced": replaced} if upsert else {})}
        write_manifest(work, compose_manifest(
            manifest.to_dict(), count=n, corpus=corpus_before + sums,
            added=[*manifest.added, added], fts=full_text))
    swap_in(work, folder)
    return AddResult(folder, n - start, n, time.perf_counter() - t0, list(skipped.values()),
                     replaced)


def _rows_kept(folder: Path, files: list[Path], read_options: ReadOptions) -> np.ndarray:
    """A mask over the rows of `folder`: false where the row's record id (doc_id) is one the
    new `files` hold again, the rows an upsert deletes. The files are read once more for
    their ids (cheap beside embedding them), without the reader's warnings: the add that
    follows reads them again and gives each warning once."""
    with _unwarned():
        ids = list(dict.fromkeys(s.doc_id for s in read_sentences([str(f) for f in files],
                                                                  options=read_options)
                                 if s.doc_id))
    total = whole_count(folder)  # rows and vectors agree, or rows could not meet vectors
    with MetadataStore.open(folder / META_FILE) as store:
        return keep_mask(total, matching_rows(store, ids))


@contextmanager
def _unwarned() -> Iterator[None]:
    """The qtsearch logger drops this thread's messages meanwhile (a server's other requests
    still log theirs)."""
    log = logging.getLogger("qtsearch")
    me = threading.get_ident()

    def other_threads(record: logging.LogRecord) -> bool:
        return record.thread != me

    log.addFilter(other_threads)
    try:
        yield
    finally:
        log.removeFilter(other_threads)
