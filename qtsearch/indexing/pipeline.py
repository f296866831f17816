"""Corpus → searchable index: read → (embed → fit → faiss) ∥ SQLite metadata + BM25 files.

Memory stays flat as the corpus grows: sentences are read into fixed-size shards (Parquet, with
their source, line, document and position), each shard is embedded into an `.npy` file, a
vector transform (`--fit`, qtsearch.index.transform) is fitted on a sample, and the index is
trained on a sample and filled shard by shard with the transformed vectors. The metadata stage
writes the rows and their BM25 files, on a big build in a thread beside the others from the end
of reading (qtsearch.indexing.state.stage_beside). Only the final index itself grows.

Builds are atomic and resumable. Everything is written into `<out>.partial/` with a small
`state.json`; a rerun with the same corpus, model and options skips what is finished (reading,
every embedded shard, the trained index), and the finished folder is renamed into place in one
step, so no reader ever sees half an index. `--overwrite` keeps the old index until the new one
is complete. Appending (qtsearch.indexing.append) and derived builds (qtsearch.indexing.derive)
swap in the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.config import save_config
from qtsearch.core.errors import InputError, Interrupted, OutputError, UsageError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import IndexEncoder, TokenEncoder
from qtsearch.encoders.corpus_words import prepare_corpus_words, refines
from qtsearch.encoders.registry import load_encoder
from qtsearch.index.index_folder import file_checksum, folder_bytes, require_writable, swap_in
from qtsearch.index.lock import real_folder, writer_lock
from qtsearch.index.manifest import (
    compose_manifest,
    now,
    read_manifest,
    read_options_fields,
    write_manifest,
)
from qtsearch.index.names import (
    CONFIG_FILE,
    INDEX_FILE,
    INDEX_TYPES,
    MANIFEST,
    PARQUET_FILE,
)
from qtsearch.index.transform import (
    FIT_SAMPLE,
    TRANSFORM_FILE,
    TRANSFORM_JSON,
    VectorTransform,
    auto_fit,
    canonical_fit,
)
from qtsearch.indexing import shards as shard_files
from qtsearch.indexing.build_config import IndexConfig, default_out
from qtsearch.indexing.index_stage import IndexStage, build_fields, manifest_fields
from qtsearch.indexing.metadata_stage import write_metadata
from qtsearch.indexing.rerun import built_before
from qtsearch.indexing.state import (
    BESIDE_EMBED,
    SHARDS,
    STATE_FILE,
    BuildState,
    metadata_beside,
    stage_beside,
)
from qtsearch.indexing.tokens import BuildTokens, shard_ids, shard_inputs
from qtsearch.text.reader import list_files, sentence_rows

#: Without --split-sentences, a corpus of at least WRAPPED_MIN_LINES lines more than
#: WRAPPED_SHARE of which run on into the next line (no sentence end, and the next line starts
#: in lower case) gets a warning. A line without a full stop alone is no sign: SICK and
#: caption files hold one sentence a line with none. Hard-wrapped books run on in far more
#: than this share of lines, one-sentence-a-line corpora in almost none.
SENTENCE_ENDS = frozenset(""".!?…:;"'”’»)]""")
WRAPPED_SHARE = 0.25
WRAPPED_MIN_LINES = 50
#: Seed of the sample the vector transform is fitted on (the index trains on seed 0).
FIT_SEED = 2


@dataclass
class BuildResult:
    """What a build produced, for the summary table and for callers."""

    path: Path
    manifest: dict[str, Any]
    resumed: list[str] = field(default_factory=list)  # what a rerun could skip
    bytes_on_disk: int = 0
    #: a mean model's words this run embedded: tokens, composed (from word pieces), unknown
    words: dict[str, int] | None = None
    #: the index at `path` was already built by this very command: nothing was done
    already_built: bool = False


def model_spec(encoder: IndexEncoder) -> str:
    """What the manifest records for `load_encoder` to reload the model: a model folder's
    absolute path, or an encoder's name (minilm, model2vec, glove)."""
    return encoder.path if isinstance(encoder.path, str) else str(Path(encoder.path).resolve())


class Builder:
    """One build of one index folder; `run()` does (or resumes) every stage."""

    #: How long `run` waits for another writer of the folder (qtsearch.index.lock).
    wait: float | None = 0.0

    def __init__(self, config: IndexConfig, reporter: Reporter | None = None):
        if config.shard_size < 1 or config.batch_size < 1:
            raise UsageError("--shard-size and --batch-size must be at least 1")
        if config.index != "auto" and config.index not in INDEX_TYPES:
            raise UsageError(f"--index must be auto or one of {', '.join(INDEX_TYPES)}, "
                             f"not {config.index!r}")
        config.read_options().check()
        self.config = config
        # a link to an index folder stands for that folder (qtsearch.index.lock.real_folder)
        self.out = real_folder(config.out if config.out else default_out(config.corpus))
        self.partial = self.out.with_name(self.out.name + ".partial")
        self.shards = self.partial / SHARDS
        self.reporter = reporter or Reporter()
        self.state = BuildState(self.partial)
        self.fit = canonical_fit(config.fit)
        self.transform: VectorTransform | None = None
        self.words: dict[str, int] | None = None  # BuildResult.words

    # -- checks before any work ------------------------------------------------------------
    def _check_output(self) -> None:
        if not self.out.exists():
            return
        if not self.config.overwrite:
            raise OutputError(f"{self.out}: already exists (use --overwrite to replace it, or "
                              f"--out for another folder)")
        if not self.out.is_dir() or not (
                (self.out / MANIFEST).is_file() or not any(self.out.iterdir())):
            raise OutputError(f"{self.out}: exists and is not a qtsearch index; refusing to "
                              f"replace it")
        require_writable(self.out)  # the old index is deleted once the new one is in place

    def _resume_key(self, corpus: list[dict[str, Any]], encoder: IndexEncoder) -> str:
        """What the spooled shards depend on: same key → the shards can be reused."""
        c, o = self.config, self.config.read_options()
        basis = {"corpus": [(x["path"], x["sha256"]) for x in corpus],
                 "model": encoder.fingerprint, "split": o.split,
                 "format": o.fmt, "docs": o.docs, "passage_words": o.passage_words,
                 # a tuple, not RecordFields: the key's bytes stay as they were
                 "fields": (o.fields.id, o.fields.title, o.fields.text),
                 "shard_size": c.shard_size, "batch_size": c.batch_size,
                 "precision": c.precision, "device": str(encoder.device.type)}
        return hashlib.sha256(repr(sorted(basis.items())).encode()).hexdigest()[:16]

    # -- stages ----------------------------------------------------------------------------
    def _read(self, files: list[Path]) -> None:
        """Stream sentences into Parquet row shards of `shard_size` (resumes from scratch:
        reading is cheap next to embedding)."""
        c = self.config
        t0 = time.perf_counter()
        sizes = {str(f): f.stat().st_size for f in files}
        n, shard, buf = 0, 0, []
        current = None
        open_ends = 0  # lines that run on into the next one (one-a-line input only)
        run_on = False  # the previous line did not end like a sentence
        with self.reporter.stage("read", sum(sizes.values()) / 1e6, "MB") as advance, \
                shard_files.rows_behind(self.shards) as write:
            # rows, not Sentence objects: this stage is one core's, before any other starts
            for row in sentence_rows([str(f) for f in files], options=c.read_options()):
                text, source, _line, _doc, _position, title, _url, _doc_id, _section = row
                if not c.split_sentences and title is None:  # WikiExtractor is split
                    open_ends += run_on and text[:1].islower()
                    run_on = text.rstrip()[-1:] not in SENTENCE_ENDS
                if source != current:
                    if current is not None:
                        advance(sizes.get(current, 0) / 1e6)
                    current = source
                buf.append(row)
                if len(buf) == c.shard_size:
                    write(shard, buf, n)
                    n += len(buf)
                    shard += 1
                    buf = []
            if buf:
                write(shard, buf, n)
                n += len(buf)
                shard += 1
            advance(sizes.get(current or "", 0) / 1e6)
        if n >= WRAPPED_MIN_LINES and open_ends > WRAPPED_SHARE * n:
            self.reporter.note(
                f"read: warning: {open_ends / n:.0%} of the {n:,} lines end mid-sentence: this "
                f"looks like wrapped running text; add --split-sentences to index sentences "
                f"rather than line fragments", warn=True)
        self.state["read"] = {"count": n, "shards": shard}
        self.state.timed("read", t0)

    def _embed(self, encoder: IndexEncoder) -> None:
        """Embed every shard not embedded yet. Our own models take the token path (length-sorted
        batches of token ids, `TokenEncoder.encode_ids`); any other encoder (MiniLM, model2vec,
        GloVe: only `encode()`) is given each shard's texts.

        Where `TokenEncoder.tokenises_alongside()`, the next shard is tokenised meanwhile, by
        worker processes on every core (qtsearch.indexing.tokens; a thread for small builds):
        tokenised in the main thread, it would leave a GPU idle meanwhile, and on the CPU it
        costs part of the stage (docs/benchmarks.md, "Speed" and "On a GPU")."""
        c = self.config
        t0 = time.perf_counter()
        count, shards = self.state["read"]["count"], self.state["read"]["shards"]
        done = set(self.state["embedded"])
        already = sum(shard_files.shard_rows(shard_files.rows_path(self.shards, i))
                      for i in done)
        fast = isinstance(encoder, TokenEncoder)  # ours: token ids
        tokens = BuildTokens.for_encoder(encoder)  # this build's: not kept on the encoder

        def texts(shard: int) -> list[str]:
            return shard_files.read_texts(shard_files.rows_path(self.shards, shard))

        todo = [i for i in range(shards) if i not in done]
        if refines(encoder):  # words it composes move towards their passages: a first pass
            with self.reporter.stage("words", count, "sentences") as advance, shard_ids(
                    texts, list(range(shards)), count, encoder) as ids:
                prepare_corpus_words(encoder, self.partial, ids, advance, keep=tokens.kept)
        with self.reporter.stage("embed", count, "sentences") as advance, shard_inputs(
                texts, todo, count - already, encoder if fast else None, tokens.kept) as inputs:
            advance(already)
            for i, batch in zip(todo, inputs, strict=True):
                vectors = (encoder.encode_ids(batch, c.batch_size, normalize=True,
                                              progress=advance, counts=tokens.counts) if fast
                           else encoder.encode(batch, c.batch_size, normalize=True,
                                               progress=advance))
                shard_files.write_npy(shard_files.emb_path(self.shards, i),
                                      np.asarray(vectors, dtype=np.float32))
                self.state["embedded"].append(i)
                self.state.timed("embed", t0)
                t0 = time.perf_counter()
        self.state.timed("embed", t0)
        if tokens.counts is not None and tokens.counts.tokens:
            self.words = tokens.counts.summary()
            self.reporter.note(tokens.counts.line())

    def _vectors(self) -> Iterator[np.ndarray]:
        """The encoder's vectors, shard by shard (memory-mapped)."""
        for i in range(self.state["read"]["shards"]):
            yield np.load(shard_files.emb_path(self.shards, i), mmap_mode="r")

    def _fit(self, preferred: str | None) -> None:
        """Fit `--fit` on a fixed-seed sample of the embedded vectors and save it in the
        folder (its time counts in the index stage, which it prepares)."""
        t0 = time.perf_counter()
        for name in (TRANSFORM_FILE, TRANSFORM_JSON):
            (self.partial / name).unlink(missing_ok=True)
        count = self.state["read"]["count"]
        fit = self.fit if self.fit != "auto" else auto_fit(count, preferred)
        if fit != "none" and count < 2:
            self.reporter.note(f"fit: {count} sentence cannot fit {fit}; vectors kept as "
                               f"the encoder gives them", warn=True)
        self.transform = None if count < 2 else VectorTransform.fit(
            shard_files.sample_rows(self._vectors(), count, FIT_SAMPLE, FIT_SEED), fit)
        if self.transform is not None:
            self.transform.save(self.partial)
        with self.state.lock:
            self.state["transform"] = {
                "requested": self.fit, **(self.transform.describe() if self.transform else {})}
        self.state.timed("index", t0)

    def _index(self, dim: int) -> None:
        t0 = time.perf_counter()
        read = self.state["read"]
        stage = self._index_stage(read["count"], read["shards"])
        info = stage.run(dim, self.config.index, self.config.device, self.partial / INDEX_FILE)
        with self.state.lock:
            self.state["index"] = info
        self.state.timed("index", t0)

    def _index_stage(self, count: int, shards: int) -> IndexStage:
        """The index stage over the embedded shards (the Ray engine fills it on its workers)."""
        return IndexStage(self._vectors, count, shards, self.reporter, self.transform)

    def _metadata(self, stop: threading.Event) -> None:
        t0 = time.perf_counter()
        read = self.state["read"]
        write_metadata(self.partial, self.shards, read["count"], read["shards"], self.reporter,
                       self.config.parquet, stop)
        self.state.timed("metadata", t0)

    def _stages(self, files: list[Path], encoder: IndexEncoder) -> None:
        c = self.config
        with self.reporter:
            if not self.state["read"]:
                try:
                    self._read(files)
                except InputError:  # nothing worth resuming yet: leave no trace
                    shutil.rmtree(self.partial, ignore_errors=True)
                    raise
            beside = metadata_beside(self.state["read"]["count"])
            with stage_beside(self._metadata, beside) as check:
                self._embed(encoder)
                check()  # a failed metadata stage: said now, not after the index stage
                refit = (self.state.get("transform") or {}).get("requested") != self.fit
                if refit:
                    self._fit(encoder.search.get("fit"))
                else:
                    self.transform = VectorTransform.load(self.partial)
                if refit or (self.state["index"] or {}).get("requested") != c.index:
                    self._index(self.transform.out_dim if self.transform else encoder.dim)

    def _manifest(self, encoder: IndexEncoder, corpus: list[dict[str, Any]]) -> dict[str, Any]:
        c, info = self.config, self.state["index"]
        return compose_manifest(
            count=self.state["read"]["count"], **manifest_fields(info),
            dim=self.transform.out_dim if self.transform else encoder.dim,
            model_dim=encoder.dim,
            transform=self.transform.describe() if self.transform else None,
            metric="cosine",
            model={"path": model_spec(encoder), "name": encoder.name,
                   "fingerprint": encoder.fingerprint, "dim": encoder.dim},
            corpus=corpus, **read_options_fields(c.read_options()),
            stages=dict(self.state["stages"]), created=now(), fts=False,
            build={**build_fields(info), "embed_device": str(encoder.device),
                   "shard_size": c.shard_size,
                   "parallel_stages": BESIDE_EMBED if metadata_beside(
                       self.state["read"]["count"]) else False})

    # -- the whole build -------------------------------------------------------------------
    def run(self) -> BuildResult:
        """Build under the index's writer lock (qtsearch.index.lock; `self.wait` as its
        `wait`), so a second build or add of the same folder waits or is refused."""
        made = not self.out.parent.exists()
        self.out.parent.mkdir(parents=True, exist_ok=True)  # the lock file lives there
        try:
            with writer_lock(self.out, wait=self.wait,
                             on_wait=lambda line: self.reporter.note(line, warn=True)):
                return self._run()
        except BaseException:
            if made:  # leave no empty folder behind a failed first build
                with contextlib.suppress(OSError):
                    self.out.parent.rmdir()
            raise

    def _run(self) -> BuildResult:
        c = self.config
        if self.out.exists() and not c.overwrite and (done := built_before(c, self.out)):
            return BuildResult(self.out, done, [], folder_bytes(self.out), already_built=True)
        self._check_output()
        files = list_files(c.corpus)
        encoder = load_encoder(c.model, device=c.device, precision=c.precision)
        corpus = [file_checksum(f) for f in files]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        resumed = self.state.load(self._resume_key(corpus, encoder), c.index, self.fit,
                                  (self.partial / PARQUET_FILE).exists(), c.parquet)
        if resumed:
            self.reporter.note(f"resuming {self.partial}: {', '.join(resumed)} already done")
        if self.state.get("finished"):  # killed between finishing and renaming
            manifest = read_manifest(self.partial)
        else:
            try:
                self._stages(files, encoder)
            except KeyboardInterrupt:
                raise Interrupted(self.state.interrupted()) from None
            manifest = self._manifest(encoder, corpus)
            save_config(c, self.partial / CONFIG_FILE)
            write_manifest(self.partial, manifest)
            with self.state.lock:
                self.state["finished"] = True
            self.state.save()
        shutil.rmtree(self.shards, ignore_errors=True)  # also when a kill interrupted this
        swap_in(self.partial, self.out)
        (self.out / STATE_FILE).unlink()  # after the rename, so a kill before it can resume
        return BuildResult(self.out, manifest, resumed, folder_bytes(self.out), self.words)


def build_index(config: IndexConfig, reporter: Reporter | None = None,
                wait: float | None = 0.0) -> BuildResult:
    """Build (or resume building) the index described by `config`; `wait`: how long to wait
    for another writer of the same folder (0: refuse at once, None: as long as it takes)."""
    builder = Builder(config, reporter)
    builder.wait = wait
    return builder.run()
