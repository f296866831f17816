"""Open vocabulary for a mean model: which composition of unknown words, measured.

    python benchmarks/open_vocabulary.py [--model DIR] [--data ../shared/data/beir]

1. Reconstruction: fit on 90% of the model's words, compose the held-out 10% from their pieces,
   cosine to their true rows (all held-out words, and the rarer half of them: unknown words are
   rare ones). Compared: the <unk> row (today), WordPiece pieces (MiniLM's vocabulary) at
   several ridge weights, fastText-style hashed character n-grams.
2. Retrieval, semantic leg alone: nDCG@10 on SciFact train and NFCorpus dev, every document
   "title. text" encoded whole as one mean (no 50-token cut), queries from queries.jsonl,
   cosine ranking over the whole corpus. Compared: the closed vocabulary, WordPiece, hashed
   n-grams, and WordPiece refined by the corpus (a corpus word's composed row moved towards
   the mean of the documents it occurs in).

Prints a markdown table (docs/open-vocabulary.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.corpus_words import fit_corpus_words, set_corpus_words
from qtsearch.encoders.files import PIECES
from qtsearch.encoders.mean import MeanEncoder
from qtsearch.encoders.pieces import (
    fit_pieces,
    minilm_pieces,
    piece_matrix,
    ridge_fit,
    save_pieces,
)
from qtsearch.evaluation.retrieval import beir
from qtsearch.text.tokenizer import tokenize
from qtsearch.text.vocab import Vocab

SETS = {"scifact": "train", "nfcorpus": "dev"}
#: How far a corpus word's row moves towards its documents (in units of its own length).
BETAS = (1.0, 4.0, 8.0, 16.0, 64.0)


def fnv1a(text: str) -> int:
    h = 2166136261
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def ngrams(word: str, buckets: int, lo: int = 3, hi: int = 5) -> list[int]:
    w = f"<{word.lower()}>"
    return sorted({fnv1a(w[i : i + n]) % buckets for n in range(lo, hi + 1)
                   for i in range(len(w) - n + 1)})


class HashedPieces:
    """Character n-grams hashed into buckets (fastText), composed as their mean."""

    def __init__(self, vectors: np.ndarray, buckets: int):
        self.vectors, self.buckets = vectors.astype(np.float32), buckets

    def compose(self, word: str) -> np.ndarray | None:
        return self.vectors[ngrams(word, self.buckets)].mean(axis=0)


def cos_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b) / np.maximum(
        np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)


def reconstruction(enc: MeanEncoder, rows: list[str]) -> None:
    rng = np.random.default_rng(0)
    words = enc.vocab.words
    ids = np.arange(2, len(enc.vocab))
    # held out by lower-cased form: "Anemia" in the fit would give away "anemia"'s pieces
    keys = sorted({w.lower() for w in words[2:]})
    out = set(rng.choice(keys, size=len(keys) // 10, replace=False).tolist())
    held = np.array([i for i in ids if words[i].lower() in out])
    train = np.setdiff1d(ids, held)
    rare = held[held >= np.median(ids)]  # the vocabulary is ranked by frequency
    pieces = minilm_pieces()
    index = {p: i for i, p in enumerate(pieces)}
    from qtsearch.encoders.pieces import wordpiece

    def score(name: str, composed: np.ndarray, size: str) -> None:
        c = cos_rows(composed, enc.table[held])
        r = cos_rows(composed[np.searchsorted(held, rare)], enc.table[rare])
        rows.append(f"| {name} | {size} | {c.mean():.3f} | {r.mean():.3f} |")
        print(rows[-1], flush=True)

    score("<unk> row (closed vocabulary)", np.repeat(enc.table[1:2], len(held), 0), "-")
    for ridge in (0.03, 0.1, 0.3, 1.0):
        t = time.perf_counter()
        used, vec = fit_pieces(enc.table, enc.vocab, pieces, ridge, words=train)
        full = np.zeros((len(pieces), vec.shape[1]), np.float32)
        full[used] = vec
        a = piece_matrix([words[i] for i in held], lambda w: wordpiece(w, index), len(pieces))
        score(f"WordPiece, ridge {ridge} ({time.perf_counter() - t:.0f} s)", a @ full,
              f"{len(used)} pieces, {len(used) * vec.shape[1] * 2 / 1e6:.1f} MB fp16")
    for buckets in (1 << 14, 1 << 16):
        t = time.perf_counter()
        a = piece_matrix([words[i] for i in train], lambda w, b=buckets: ngrams(w, b), buckets)
        vec = ridge_fit(a, enc.table[train], 1.0, iterations=200)
        h = piece_matrix([words[i] for i in held], lambda w, b=buckets: ngrams(w, b), buckets)
        score(f"char 3-5-grams, {buckets} buckets, ridge 1 ({time.perf_counter() - t:.0f} s)",
              h @ vec, f"{buckets * vec.shape[1] * 2 / 1e6:.1f} MB fp16")


def read_set(root: Path, name: str) -> tuple[list[str], list[str], dict[str, str],
                                               dict[str, dict[str, int]]]:
    """(document ids, "title. text" documents, queries by id, judgments query -> doc ->
    grade) of one collection's split (SETS)."""
    collection = beir.load(root / name, SETS[name])
    ids, docs = [], []
    with gzip.open(collection.corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            ids.append(r["_id"])
            docs.append(f"{r.get('title', '')}. {r.get('text', '')}".strip(". "))
    return ids, docs, collection.queries, collection.qrels


def ndcg10(enc: MeanEncoder, ids: list[str], docs: list[str], queries: dict[str, str],
           qrels: dict[str, dict[str, int]], doc_vectors: np.ndarray | None = None) -> float:
    d = doc_vectors if doc_vectors is not None else enc.encode(docs, normalize=True)
    qids = list(queries)
    q = enc.encode([queries[i] for i in qids], normalize=True)
    top = np.argsort(-(q @ d.T), axis=1)[:, :10]
    total = sum(beir.ndcg([ids[j] for j in row], qrels[qi])
                for qi, row in zip(qids, top, strict=True))
    return total / len(qids)


def unknown_share(enc: MeanEncoder, texts: list[str]) -> float:
    words = [t for s in texts for t in tokenize(s) if any(c.isalnum() for c in t)]
    return sum(1 for w in words if not Vocab.knows(enc.vocab, w)) / len(words)


def refine(enc: MeanEncoder, docs: list[str], beta: float, min_texts: int) -> None:
    """The library's corpus words (qtsearch.encoders.corpus_words) over the documents."""
    set_corpus_words(enc, *fit_corpus_words(enc, [[enc.token_ids(d) for d in docs]], beta,
                                              min_texts=min_texts))


def retrieval(model: Path, root: Path, rows: list[str], betas: tuple[float, ...] = BETAS,
              hashed_too: bool = True, min_texts: tuple[int, ...] = (1,)) -> None:
    pieces = minilm_pieces()
    with tempfile.TemporaryDirectory() as tmp:
        plain, folder = Path(tmp) / "closed", Path(tmp) / "open"
        for f in (plain, folder):
            shutil.copytree(model, f, ignore=shutil.ignore_patterns(PIECES))
        closed = MeanEncoder(plain)
        closed.max_len = 10**6
        used, vec = fit_pieces(closed.table, closed.vocab, pieces)
        save_pieces(folder, pieces, used, vec)
        results: dict[str, list[str]] = {}
        for name in SETS:
            ids, docs, queries, qrels = read_set(root, name)
            share = unknown_share(closed, list(queries.values()))
            cells = [f"{share:.1%}", f"{ndcg10(closed, ids, docs, queries, qrels):.3f}"]
            wp = MeanEncoder(folder)
            wp.max_len = 10**6
            dv = wp.encode(docs, normalize=True)
            cells.append(f"{ndcg10(wp, ids, docs, queries, qrels, dv):.3f}")
            if hashed_too:
                hashed = MeanEncoder(folder)
                hashed.max_len = 10**6
                a = piece_matrix(closed.vocab.words[2:], lambda w: ngrams(w, 1 << 16), 1 << 16)
                assert hashed.open_vocab is not None
                hashed.open_vocab.pieces = HashedPieces(  # type: ignore[assignment]
                    ridge_fit(a, closed.table[2:], 1.0, iterations=200), 1 << 16)
                cells.append(f"{ndcg10(hashed, ids, docs, queries, qrels):.3f}")
            for beta in betas:
                for least in min_texts:
                    refined = MeanEncoder(folder)
                    refined.max_len = 10**6
                    refine(refined, docs, beta, least)
                    cells.append(f"{ndcg10(refined, ids, docs, queries, qrels):.3f}")
            results[name] = cells
            print(name, cells, flush=True)
    rows.append("")
    rows.append("| collection | unknown query words | closed | WordPiece | "
                + ("char n-grams (2^16) | " if hashed_too else "")
                + " | ".join(f"WordPiece + corpus, β {b:g}, words of {m}+ texts"
                             for b in betas for m in min_texts) + " |")
    rows.append("|---|---:|---:|---:|" + "---:|" * (len(betas) * len(min_texts) + hashed_too))
    for name, cells in results.items():
        rows.append(f"| {name} ({SETS[name]}) | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/beir"))
    ap.add_argument("--skip-reconstruction", action="store_true")
    ap.add_argument("--no-hashed", action="store_true", help="leave hashed n-grams out")
    ap.add_argument("--min-texts", default="1",
                    help="least texts a corpus word occurs in, comma-separated to compare")
    ap.add_argument("--betas", default=",".join(f"{b:g}" for b in BETAS),
                    help="corpus-word weights to compare, comma-separated")
    args = ap.parse_args()
    rows = ["| composition | size | cosine, held-out words | cosine, rarer half |",
            "|---|---|---:|---:|"]
    if not args.skip_reconstruction:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(args.model, Path(tmp) / "m", ignore=shutil.ignore_patterns(PIECES))
            reconstruction(MeanEncoder(Path(tmp) / "m"), rows)
    retrieval(args.model, args.data, rows, tuple(float(b) for b in args.betas.split(",")),
              not args.no_hashed, tuple(int(m) for m in args.min_texts.split(",")))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
