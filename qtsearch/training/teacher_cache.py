"""Teacher vectors (all-MiniLM-L6-v2) of unlabelled sentences, computed once and kept on disk.

The teacher set is a fixed selection of sentences from text files (books, Wikipedia): from each
file, evenly spaced sentences of 4–60 tokens, the same number per file, duplicates dropped. A
sentence's id is its row in that selection; the selection's signature (a hash of its sentences)
and the teacher's fingerprint (a hash of its weights) name the cache folder, so any run over
the same selection with the same teacher reuses the vectors and a changed teacher or selection
never meets stale ones. The selection itself is kept too (`ROOT/selections/`, keyed by the files'
contents and the count), so a run over books + Wikipedia reads them once, not at
every start.

On disk: `ROOT/FINGERPRINT/SIGNATURE/` holds `shard_NNNNN.npy` (fp16, L2-normalised rows
[k·S, (k+1)·S)) and `manifest.json` (teacher, signature, rows, shard size, dimension, finished
shards). A shard is written to a temporary file and renamed, so after a kill every shard on disk
is whole; the next run encodes only the missing ones. MiniLM encodes slowly on a CPU
(docs/training.md gives its rate): the cache is what keeps the teacher out of training time
after the first run, and out of search entirely.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import InputError
from qtsearch.text.digest import sentences_digest
from qtsearch.text.reader import list_files, read_sentences
from qtsearch.text.token_corpus import corpus_signature
from qtsearch.text.tokenizer import tokenize

#: Sentences per shard: a kill loses at most this many encodings.
SHARD_ROWS = 4096
MIN_TOKENS, MAX_TOKENS = 4, 60

Encode = Callable[[list[str]], np.ndarray]


def select_sentences(paths: Iterable[str | os.PathLike], n: int) -> list[str]:
    """Up to `n` distinct sentences of 4–60 tokens spread over every file of `paths` (running
    text, split into sentences; WikiExtractor markup dropped): evenly spaced within each file,
    ceil(n / files) per file, so every book and Wikipedia shard is represented."""
    files = list_files(paths)
    quota = math.ceil(n / len(files))
    seen: set[str] = set()
    out: list[str] = []
    for f in files:
        texts = [s.text for s in read_sentences([f], split=True, strict_empty=False)
                 if MIN_TOKENS <= len(tokenize(s.text)) <= MAX_TOKENS]
        if not texts:
            continue
        picks = np.unique(np.linspace(0, len(texts) - 1, min(quota, len(texts))).round())
        for i in picks.astype(int):
            if texts[i] not in seen:
                seen.add(texts[i])
                out.append(texts[i])
    if not out:
        raise InputError("the teacher files hold no sentence of 4 to 60 tokens")
    return out[:n]


def cached_selection(paths: Sequence[str | os.PathLike], n: int, root: Path) -> list[str]:
    """`select_sentences`, read from `root/selections/` when the same files (by content) were
    selected with the same `n` before."""
    path = Path(root) / "selections" / f"{corpus_signature(paths, True, n, MAX_TOKENS)}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    sentences = select_sentences(paths, n)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, sentences)
    return sentences


class TeacherCache:
    """The teacher vectors of `sentences` under `root`, shard by shard."""

    def __init__(self, root: Path, fingerprint: str, sentences: Sequence[str],
                 shard_rows: int = SHARD_ROWS):
        self.sentences, self.fingerprint, self.shard_rows = sentences, fingerprint, shard_rows
        # identifies the teacher set by its sentences, in order (row i is sentence id i)
        self.signature = sentences_digest(sentences)
        self.folder = Path(root) / fingerprint / self.signature
        self.n_shards = math.ceil(len(sentences) / shard_rows)
        self.encoded = 0  # sentences this object sent to the teacher

    def shard_path(self, k: int) -> Path:
        return self.folder / f"shard_{k:05d}.npy"

    def rows(self, k: int) -> Sequence[str]:
        """The sentences of shard k."""
        return self.sentences[k * self.shard_rows : (k + 1) * self.shard_rows]

    def missing(self) -> list[int]:
        """Shards not on disk yet (a kill leaves none half-written)."""
        return [k for k in range(self.n_shards) if not self.shard_path(k).is_file()]

    def _manifest(self, dim: int | None) -> None:
        done = [k for k in range(self.n_shards) if self.shard_path(k).is_file()]
        write_json_atomic(self.folder / "manifest.json", {
            "teacher": self.fingerprint, "signature": self.signature,
            "sentences": len(self.sentences), "shard_rows": self.shard_rows, "dim": dim,
            "finished_shards": done, "complete": len(done) == self.n_shards})

    def fill(self, teacher: Callable[[], Encode],
             progress: Callable[[int], None] | None = None) -> int:
        """Encode the missing shards with `teacher()` (made only when one is missing, so a
        complete cache never loads the teacher); returns how many sentences were encoded."""
        todo = self.missing()
        if not todo:
            return 0
        self.folder.mkdir(parents=True, exist_ok=True)
        encode = teacher()
        before = self.encoded
        for k in todo:
            rows = list(self.rows(k))
            vectors = np.asarray(encode(rows), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float16)
            tmp = self.folder / f".shard_{k:05d}.tmp.npy"
            np.save(tmp, vectors)
            os.replace(tmp, self.shard_path(k))
            self.encoded += len(rows)
            self._manifest(vectors.shape[1])
            if progress:
                progress(len(rows))
        return self.encoded - before

    def load(self) -> np.ndarray:
        """All vectors, fp16 [n, dim] (every shard must be there: `fill` first)."""
        missing = self.missing()
        if missing:
            raise InputError(f"{self.folder}: teacher shards {missing[:5]} missing")
        parts = [np.load(self.shard_path(k), mmap_mode="r") for k in range(self.n_shards)]
        vectors = np.concatenate(parts)
        if len(vectors) != len(self.sentences):
            raise InputError(f"{self.folder}: {len(vectors):,} teacher vectors for "
                             f"{len(self.sentences):,} sentences; delete the folder")
        return vectors

    def manifest(self) -> dict:
        return json.loads((self.folder / "manifest.json").read_text())
