"""The corpus side of `qtsearch adapt` (training/adapt_trainer.py): documents read from records or
text, the words the base model lacks and their starting vectors, and each task's pairs.

A document is a title (or None) and its sentences. Every HELD_OUT-th document is held out:
its pairs validate, one pair per document (two pairs of one document in a batch are
near-duplicates, and the figure should measure finding the document).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np

from qtsearch.core.errors import InputError, ModelError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.corpus_words import BETA  # a new word's start: the build's own
from qtsearch.encoders.files import read_config
from qtsearch.encoders.nn.folder import encoder_config
from qtsearch.text import records
from qtsearch.text.reader import list_files, read_sentences
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import Vocab
from qtsearch.training.configs import HELD_OUT
from qtsearch.training.objectives.contrastive import PairSet

#: Pairs per document for the title and inverse-cloze tasks (the first sentences, which in
#: abstracts and articles state the topic): more adds steps, not new documents.
PER_DOC = 4


@dataclass
class Document:
    title: str | None
    sentences: list[str]


# ----- the corpus -----------------------------------------------------------------------------

def read_documents(paths: Sequence[str], split: bool) -> list[Document]:
    """The corpus as documents of sentences: records (qtsearch.text.records), or text files as
    `qtsearch train` reads them (a blank line or a new file starts a document; WikiExtractor
    articles carry their titles)."""
    files = list_files(paths)
    docs: list[Document] = []
    texts = [str(f) for f in files if not records.is_records(f)]
    for f in files:
        if records.is_records(f):
            docs.extend(Document(d.title, d.sentences) for d in records.read_documents(f))
    if texts:
        current = -1
        for s in read_sentences(texts, split=split, strict_empty=False):
            if s.doc != current:
                current = s.doc
                docs.append(Document(getattr(s, "title", None) or None, []))
            docs[-1].sentences.append(s.text)
    docs = [d for d in docs if d.sentences]
    if not docs:
        raise InputError("the corpus holds no sentences: nothing to adapt to")
    return docs


def corpus_signature(paths: Sequence[str]) -> str:
    """What identifies the corpus files for --resume: their paths, sizes and times."""
    h = hashlib.sha256()
    for f in list_files(paths):
        st = f.stat()
        h.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


# ----- the base model and the vocabulary ---------------------------------------------------

def base_folder(model: str | None) -> Path:
    """The base model's folder; anything but a mean-of-words model folder is refused."""
    from qtsearch.encoders.base import default_model_path
    from qtsearch.encoders.registry import EXTERNAL_ENCODERS

    if model in (None, "default"):
        return default_model_path()
    if model in EXTERNAL_ENCODERS:
        raise ModelError(f"{model}: an external encoder cannot be adapted; adapt a "
                         "mean-of-words model folder (the default model is one)")
    folder = Path(model)
    cfg = encoder_config(read_config(folder))
    if cfg.encoder != "mean" or cfg.objective not in ("multitask", "pairs", "nli"):
        raise ModelError(f"{folder}: only mean-of-words models can be adapted (this one is a "
                         f"{cfg.encoder} {cfg.objective} model)")
    return folder


def new_words(token_lists: Iterable[list[str]], vocab: Vocab, size: int,
              min_count: int) -> list[str]:
    """The corpus words the base vocabulary does not know (in any casing), most frequent first
    (ties by the word: deterministic)."""
    counts: Counter[str] = Counter()
    for tokens in token_lists:
        counts.update(t for t in tokens if not vocab.knows(t))
    ranked = sorted(((w, n) for w, n in counts.items() if n >= min_count),
                    key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[:size]]


def context_vectors(table: np.ndarray, vocab: Vocab, sentences: list[list[str]],
                    words: list[str], composed: np.ndarray | None = None) -> np.ndarray:
    """A start for each new word, read off the sentences it occurs in: its composed row
    (`composed`, the base's pieces; zero where it has none) moved towards the mean of those
    sentences' unit vectors (known words only), centred on the corpus mean, by BETA times the
    composed row's length (the base rows' median length without one). As the build's corpus
    words do (qtsearch.encoders.corpus_words): the long move also weighs a rare word more in its
    text's mean."""
    from scipy.sparse import csr_matrix

    position = {w: i for i, w in enumerate(words)}
    rows, cols, flat, lengths = [], [], [], []
    for s, tokens in enumerate(sentences):
        known = [i for i in vocab.encode(tokens, len(tokens) or 1, fold_case=True) if i > 1]
        flat.extend(known)
        lengths.append(len(known))
        for t in set(tokens):
            if t in position:
                rows.append(position[t])
                cols.append(s)
    lengths_a = np.asarray(lengths, dtype=np.int64)
    weights = np.repeat(1.0 / np.maximum(lengths_a, 1), lengths_a).astype(np.float32)
    indptr = np.concatenate([[0], np.cumsum(lengths_a)])
    means = csr_matrix((weights, np.asarray(flat, dtype=np.int64), indptr),
                       shape=(len(sentences), len(table))) @ table
    means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-8)
    occurs = csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                        shape=(len(words), len(sentences)))
    counts = np.asarray(occurs.sum(axis=1)).ravel()
    context = (occurs @ means) / np.maximum(counts, 1)[:, None] - means.mean(axis=0)
    start = np.zeros_like(context) if composed is None else composed
    length = np.linalg.norm(start, axis=1, keepdims=True)
    length[length == 0] = float(np.median(np.linalg.norm(table[2:], axis=1)))
    move = BETA * length / np.maximum(np.linalg.norm(context, axis=1, keepdims=True), 1e-8)
    return (start + move * context).astype(np.float32)


def composed_rows(base: Path, words: list[str], dim: int) -> np.ndarray | None:
    """The base's pieces composition of each word (zero where none), None without a table."""
    from qtsearch.encoders.pieces import Pieces

    pieces = Pieces.load(base)
    if pieces is None:
        return None
    out = np.zeros((len(words), dim), dtype=np.float32)
    for i, w in enumerate(words):
        v = pieces.compose(w.lower())
        if v is not None:
            out[i] = v
    return out


# ----- the pairs ----------------------------------------------------------------------------

def split_pairs(pairs: list[tuple[int, list[int], list[int]]]) -> tuple[PairSet, PairSet]:
    """(training, validation) PairSets of (document, anchor ids, positive ids) triples. The
    held-out documents validate with one pair each: two pairs of one document in a batch are
    near-duplicates (a sentence is one pair's anchor and the next pair's positive), and the
    figure should measure finding the document, not telling its pairs apart."""
    train = [p for p in pairs if p[0] % HELD_OUT]
    valid, seen = [], set()
    for p in pairs:
        if not p[0] % HELD_OUT and p[0] not in seen:
            seen.add(p[0])
            valid.append(p)

    def pair_set(items: list[tuple[int, list[int], list[int]]]) -> PairSet:
        return PairSet([a for _, a, _ in items], [b for _, _, b in items], [None] * len(items))

    return pair_set(train), pair_set(valid)


@dataclass
class Corpus:
    """The corpus as token lists per document and its pairs."""

    docs: list[Document]
    tokens: list[list[list[str]]]  # per document, per sentence
    titles: list[list[str] | None]


def corpus_tokens(docs: list[Document]) -> Corpus:
    return Corpus(docs, [[tokenize(s) for s in d.sentences] for d in docs],
                  [tokenize(d.title) if d.title else None for d in docs])


def task_pairs(corpus: Corpus, vocab: Vocab, max_len: int, doc_len: int
               ) -> dict[str, list[tuple[int, list[int], list[int]]]]:
    """Each task's (document, anchor ids, positive ids) triples."""

    def ids(tokens: list[str], n: int = max_len) -> list[int]:
        return vocab.encode(tokens, n, fold_case=True)

    out: dict[str, list[tuple[int, list[int], list[int]]]] = {
        "neighbours": [], "titles": [], "ict": []}
    for d, (sentences, title) in enumerate(zip(corpus.tokens, corpus.titles)):
        encoded = [ids(t) for t in sentences]
        out["neighbours"] += [(d, a, b) for a, b in pairwise(encoded)]
        if title:
            out["titles"] += [(d, ids(title), s) for s in encoded[:PER_DOC]]
        if len(sentences) > 1:
            for i in range(min(PER_DOC, len(sentences))):
                rest = [t for j, s in enumerate(sentences) if j != i for t in s]
                if title:
                    rest = title + rest
                out["ict"].append((d, encoded[i], ids(rest, doc_len)))
    return out

def teacher_sample(corpus: Corpus, size: int, seed: int) -> list[tuple[int, int]]:
    """(document, sentence) positions of a fixed random sample of the training documents'
    sentences, in the order they are encoded (a time budget keeps a prefix)."""
    where = [(d, i) for d, doc in enumerate(corpus.tokens) if d % HELD_OUT
             for i in range(len(doc))]
    where += [(d, i) for d, doc in enumerate(corpus.tokens) if not d % HELD_OUT
              for i in range(len(doc))][: max(1, size // HELD_OUT)]
    order = np.random.default_rng([seed, 7]).permutation(len(where))[:size]
    return [where[i] for i in order]


def teacher_vectors(sentences: list[str], budget: float, device: str, display: Reporter
                    ) -> np.ndarray:
    """MiniLM's normalised vectors of `sentences` in order, as many as `budget` seconds allow
    (encoded in chunks; the last chunk may overrun by its own time)."""
    from qtsearch.encoders.baselines import MiniLM

    model = MiniLM(device)
    parts: list[np.ndarray] = []
    start, done, chunk = time.monotonic(), 0, 256
    with display.stage("teacher vectors", len(sentences)) as bar:
        while done < len(sentences) and time.monotonic() - start < budget:
            parts.append(np.asarray(model.encode(sentences[done : done + chunk],
                                                 normalize=True), dtype=np.float16))
            done += len(parts[-1])
            bar.update(done, f"{done:,} sentences")
    return np.concatenate(parts) if parts else np.zeros((0, 384), np.float16)
