"""The corpus side of `qtsearch adapt` (training/adapt_trainer.py): documents read from records or
text, the words the base model lacks and their starting vectors, and each task's pairs.

A document is a title (or None) and its sentences. Every HELD_OUT-th document is held out:
its pairs validate, one pair per document (two pairs of one document in a batch are
near-duplicates, and the figure should measure finding the document).
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from qtsearch.core.errors import InputError, ModelError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.corpus_words import BETA  # a new word's start: the build's own
from qtsearch.encoders.files import read_config
from qtsearch.encoders.nn.folder import encoder_config
from qtsearch.text import records
from qtsearch.text.reader import list_files, read_sentences
from qtsearch.text.token_rows import TokenRows
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


@dataclass
class Corpus:
    """The corpus as token ids, four bytes a token instead of Python token lists:
    each distinct token (as written) is a type, and `sentences` (every sentence, document after
    document) and `titles` (one row a document, empty without a title) are rows of type ids.
    The documents keep their text for the teacher, which encodes a sample of it."""

    docs: list[Document]
    types: list[str]
    sentences: TokenRows
    doc_offsets: np.ndarray  # document d's sentences: doc_offsets[d] .. doc_offsets[d + 1]
    titles: TokenRows

    @cached_property
    def doc_of_sentence(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.docs), dtype=np.int64), np.diff(self.doc_offsets))

    def text(self, sentence: int) -> str:
        d = int(np.searchsorted(self.doc_offsets, sentence, side="right")) - 1
        return self.docs[d].sentences[sentence - int(self.doc_offsets[d])]

    def lookup(self, vocab: Vocab) -> np.ndarray:
        """Each type's id in `vocab`, as `vocab.encode(tokens, n, fold_case=True)` maps it."""
        return np.fromiter((vocab.encode([t], 1, fold_case=True)[0] for t in self.types),
                           dtype=np.int32, count=len(self.types))


def corpus_tokens(docs: list[Document]) -> Corpus:
    types: dict[str, int] = {}

    def type_ids(text: str) -> Iterator[int]:
        for token in tokenize(text):
            yield types.setdefault(token, len(types))

    flat, offsets, doc_offsets = array("i"), array("q", [0]), array("q", [0])
    title_flat, title_offsets = array("i"), array("q", [0])
    for d in docs:
        for s in d.sentences:
            flat.extend(type_ids(s))
            offsets.append(len(flat))
        doc_offsets.append(len(offsets) - 1)
        if d.title:
            title_flat.extend(type_ids(d.title))
        title_offsets.append(len(title_flat))

    def rows(ids: array, ends: array) -> TokenRows:
        return TokenRows.from_offsets(np.frombuffer(ids, dtype=np.int32),
                                      np.frombuffer(ends, dtype=np.int64))

    return Corpus(docs, list(types), rows(flat, offsets), np.frombuffer(doc_offsets, np.int64),
                  rows(title_flat, title_offsets))


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


def new_words(corpus: Corpus, vocab: Vocab, size: int, min_count: int) -> list[str]:
    """The corpus words (in its sentences and titles) the base vocabulary does not know (in any
    casing), most frequent first (ties by the word: deterministic)."""
    counts = (np.bincount(corpus.sentences.flat, minlength=len(corpus.types))
              + np.bincount(corpus.titles.flat, minlength=len(corpus.types)))
    ranked = sorted(((w, int(n)) for w, n in zip(corpus.types, counts, strict=True)
                     if n >= min_count and not vocab.knows(w)), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[:size]]


#: Sentences whose mean vectors are held at once while new words' contexts are summed: all of
#: a corpus's at once take sentences × dimensions × 4 bytes.
CONTEXT_CHUNK = 1 << 16


def context_vectors(table: np.ndarray, vocab: Vocab, corpus: Corpus, words: list[str],
                    composed: np.ndarray | None = None) -> np.ndarray:
    """A start for each new word, read off the sentences it occurs in: its composed row
    (`composed`, the base's pieces; zero where it has none) moved towards the mean of those
    sentences' unit vectors (known words only), centred on the corpus mean, by BETA times the
    composed row's length (the base rows' median length without one). As the build's corpus
    words do (qtsearch.encoders.corpus_words): the long move also weighs a rare word more in its
    text's mean."""
    from scipy.sparse import csr_matrix

    known_id = corpus.lookup(vocab)
    position = {w: i for i, w in enumerate(words)}
    word_of_type = np.fromiter((position.get(t, -1) for t in corpus.types), dtype=np.int64,
                               count=len(corpus.types))
    rows = corpus.sentences
    summed = np.zeros((len(words), table.shape[1]), dtype=np.float32)
    counts = np.zeros(len(words), dtype=np.int64)
    total = np.zeros(table.shape[1], dtype=np.float64)
    for a in range(0, len(rows), CONTEXT_CHUNK):
        chunk = rows.take(np.arange(a, min(a + CONTEXT_CHUNK, len(rows))))
        n = len(chunk)
        sentence = chunk.row_of_each()
        tokens = rows.flat[chunk.starts[0] : chunk.ends[-1]]
        ids = known_id[tokens]
        known = ids > 1
        lengths = np.bincount(sentence[known], minlength=n)
        weights = np.repeat(1.0 / np.maximum(lengths, 1), lengths).astype(np.float32)
        means = csr_matrix((weights, ids[known], np.concatenate([[0], np.cumsum(lengths)])),
                           shape=(n, len(table))) @ table
        means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-8)
        total += means.sum(axis=0, dtype=np.float64)
        # which new word occurs in which sentence: once a sentence, however often it occurs
        word = word_of_type[tokens]
        new = word >= 0
        pairs = np.unique(word[new] * n + sentence[new])
        counts += np.bincount(pairs // n, minlength=len(words))
        summed += csr_matrix((np.ones(len(pairs), dtype=np.float32), (pairs // n, pairs % n)),
                             shape=(len(words), n)) @ means
    context = summed / np.maximum(counts, 1)[:, None] - (total / len(rows)).astype(np.float32)
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
    for i, v in enumerate(pieces.compose_many([w.lower() for w in words])):
        if v is not None:
            out[i] = v
    return out


# ----- the pairs ----------------------------------------------------------------------------

#: A task's pairs: each pair's document, its anchors' and its positives' token ids.
TaskPairs = tuple[np.ndarray, TokenRows, TokenRows]


def split_pairs(pairs: TaskPairs) -> tuple[PairSet, PairSet]:
    """(training, validation) PairSets. The held-out documents validate with one pair each:
    two pairs of one document in a batch are near-duplicates (a sentence is one pair's anchor
    and the next pair's positive), and the figure should measure finding the document, not
    telling its pairs apart."""
    docs, anchors, positives = pairs
    train = np.flatnonzero(docs % HELD_OUT)
    held = np.flatnonzero(docs % HELD_OUT == 0)
    valid = held[np.sort(np.unique(docs[held], return_index=True)[1])]

    def pair_set(rows: np.ndarray) -> PairSet:
        return PairSet(anchors.take(rows), positives.take(rows), [None] * len(rows))

    return pair_set(train), pair_set(valid)


def task_pairs(corpus: Corpus, lookup: np.ndarray, max_len: int, doc_len: int
               ) -> dict[str, TaskPairs]:
    """Each task's pairs, document by document (`lookup`: each type's vocabulary id)."""
    encoded = corpus.sentences.encoded(lookup, max_len)
    doc = corpus.doc_of_sentence
    position = np.arange(len(doc)) - corpus.doc_offsets[doc]  # a sentence's place in its doc
    first = position < PER_DOC
    out = {}
    a = np.flatnonzero(doc[:-1] == doc[1:])
    out["neighbours"] = (doc[a], encoded.take(a), encoded.take(a + 1))
    s = np.flatnonzero(first & (corpus.titles.lengths() > 0)[doc])
    out["titles"] = (doc[s], corpus.titles.encoded(lookup, max_len).take(doc[s]),
                     encoded.take(s))
    s = np.flatnonzero(first & (np.diff(corpus.doc_offsets) > 1)[doc])
    rest = TokenRows.from_rows(_rest_of_document(corpus, int(i), int(doc[i]), doc_len) for i in s)
    out["ict"] = (doc[s], encoded.take(s), rest.encoded(lookup, doc_len))
    return out


def _rest_of_document(corpus: Corpus, sentence: int, doc: int, n: int) -> np.ndarray:
    """The first `n` type ids of a document's title and its sentences but `sentence`."""
    rows = corpus.sentences
    begin = rows.starts[corpus.doc_offsets[doc]]
    end = rows.ends[corpus.doc_offsets[doc + 1] - 1]
    parts = [corpus.titles[doc], rows.flat[begin : min(rows.starts[sentence], begin + n)],
             rows.flat[rows.ends[sentence] : min(end, rows.ends[sentence] + n)]]
    return np.concatenate(parts)[:n]


def teacher_sample(corpus: Corpus, size: int, seed: int) -> np.ndarray:
    """The sentences (indexes into `corpus.sentences`) of a fixed random sample of the training
    documents' sentences, in the order they are encoded (a time budget keeps a prefix)."""
    held = corpus.doc_of_sentence % HELD_OUT == 0
    where = np.concatenate([np.flatnonzero(~held),
                            np.flatnonzero(held)[: max(1, size // HELD_OUT)]])
    return where[np.random.default_rng([seed, 7]).permutation(len(where))[:size]]


def teacher_vectors(sentences: list[str], budget: float, device: str, display: Reporter
                    ) -> np.ndarray:
    """MiniLM's normalised vectors of `sentences` in order, as many as `budget` seconds allow
    (encoded in chunks; the last chunk may overrun by its own time)."""
    from qtsearch.encoders.baselines import MiniLM

    model = MiniLM(device, runtime="torch")  # bulk: even a short last chunk as torch encodes it
    parts: list[np.ndarray] = []
    start, done, chunk = time.monotonic(), 0, 256
    with display.stage("teacher vectors", len(sentences)) as bar:
        while done < len(sentences) and time.monotonic() - start < budget:
            parts.append(np.asarray(model.encode(sentences[done : done + chunk],
                                                 normalize=True), dtype=np.float16))
            done += len(parts[-1])
            bar.update(done, f"{done:,} sentences")
    return np.concatenate(parts) if parts else np.zeros((0, 384), np.float16)
