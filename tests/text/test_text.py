"""Corpus reading, sentence splitting, tokenisation and vocabulary, on real files and on
arbitrary Unicode (hypothesis)."""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qtsearch.core.errors import InputError, ModelError
from qtsearch.text.digest import sentences_digest
from qtsearch.text.reader import MAX_SENTENCE_CHARS, read_sentences
from qtsearch.text.splitter import split_sentences
from qtsearch.text.token_corpus import TokenCorpus
from qtsearch.text.token_table import split_table
from qtsearch.text.tokenizer import token_table, tokenize
from qtsearch.text.vocab import Vocab


def test_lines_layout_keeps_source_line_document_and_position(tmp_path: Path) -> None:
    f = tmp_path / "c.txt"
    f.write_text("First one.\nSecond one.\n\n\nThird, new doc.\n")
    got = list(read_sentences([f]))
    assert [(s.text, s.line, s.doc, s.position) for s in got] == [
        ("First one.", 1, 0, 0),
        ("Second one.", 2, 0, 1),
        ("Third, new doc.", 5, 1, 0),
    ]
    assert all(s.source == str(f) for s in got)


def test_running_text_is_split_and_mr_dr_do_not_end_sentences(tmp_path: Path) -> None:
    f = tmp_path / "book.txt"
    f.write_text(
        "Mr. Smith met Dr. Watson at\nthe station. They talked.\n\nA new paragraph here.\n"
    )
    got = list(read_sentences([f], split=True))
    assert [s.text for s in got] == [
        "Mr. Smith met Dr. Watson at the station.",
        "They talked.",
        "A new paragraph here.",
    ]
    assert [s.line for s in got] == [1, 2, 4]
    assert {s.doc for s in got} == {0}  # a file of running text is one document


def test_real_gutenberg_book_reads_from_gzip(shared_data: Path) -> None:
    book = shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz"
    sents = list(read_sentences([book], split=True))
    assert len(sents) > 5000
    assert all(s.text and len(s.text) <= MAX_SENTENCE_CHARS for s in sents)
    assert any("Mr. Knightley" in s.text for s in sents)
    assert not any(s.text.endswith("Mr.") for s in sents)


def test_folders_are_read_in_sorted_order_and_files_start_documents(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("B one.\n")
    with gzip.open(tmp_path / "a.txt.gz", "wt") as fh:
        fh.write("A one.\nA two.\n")
    (tmp_path / "notes.tsv").write_text("ignored\tcolumns\n")
    got = list(read_sentences([tmp_path]))
    assert [(s.text, s.doc) for s in got] == [("A one.", 0), ("A two.", 0), ("B one.", 1)]


def test_messy_bytes_are_repaired_with_warnings_naming_file_and_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "messy.txt"
    f.write_bytes(
        b"\xef\xbb\xbfBOM first.\r\nBad \xff byte.\r\nNUL\x00 here.\n"
        + "Ελληνικά και 日本語.\n".encode()
    )
    with caplog.at_level(logging.WARNING, logger="qtsearch"):
        got = [s.text for s in read_sentences([f])]
    assert got == ["BOM first.", "Bad \ufffd byte.", "NUL here.", "Ελληνικά και 日本語."]
    assert f"{f}:2: invalid UTF-8" in caplog.text and f"{f}:3: NUL" in caplog.text


def test_a_ten_megabyte_line_is_truncated_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = tmp_path / "long.txt"
    f.write_text("word " * 2_000_000 + "\nshort.\n")
    with caplog.at_level(logging.WARNING, logger="qtsearch"):
        got = list(read_sentences([f]))
    assert len(got[0].text) == MAX_SENTENCE_CHARS and got[1].text == "short."
    assert "truncated" in caplog.text


@pytest.mark.parametrize(
    "kind", ["missing", "empty", "blank", "binary", "truncated_gz", "no_text_folder"]
)
def test_bad_input_raises_input_error(kind: str, tmp_path: Path) -> None:
    p = tmp_path / "x.txt"
    if kind == "empty":
        p.write_text("")
    elif kind == "blank":
        p.write_text("\n   \n\t\n")
    elif kind == "binary":
        p.write_bytes(bytes(range(256)) * 100)
    elif kind == "truncated_gz":
        p = tmp_path / "x.txt.gz"
        p.write_bytes(gzip.compress(("Some text here. " * 20000).encode())[:500])
    elif kind == "no_text_folder":
        p = tmp_path / "d"
        p.mkdir()
        (p / "image.png").write_bytes(b"\x89PNG")
    with pytest.raises(InputError, match=str(p.name) if kind != "empty" else "empty|no sentences"):
        list(read_sentences([p]))


def test_tokenizer_splits_punctuation_and_keeps_case() -> None:
    assert tokenize("Don't stop, Mr. Smith!") == ["Do", "n't", "stop", ",", "Mr", ".", "Smith", "!"]
    assert tokenize("") == []


def test_a_lone_surrogate_is_tokenised_as_the_replacement_character() -> None:
    """Undecodable bytes of argv or stdin arrive as lone surrogates (surrogateescape), which
    UTF-8 cannot encode: they are read as U+FFFD, wherever they stand."""
    for text in ("Emma \udcff was happy", "\ud800", "caf\udce9 au lait \udfff!"):
        assert tokenize(text) == tokenize(text.translate({c: 0xFFFD for c in
                                                           range(0xD800, 0xE000)}))
    assert tokenize("Emma \udcff was happy") == ["Emma", "\ufffd", "was", "happy"]


def test_tokenizer_gives_blingfires_own_words_on_real_text(shared_data: Path) -> None:
    """Our reused-buffer call of BlingFire's C function against its Python wrapper: real
    Yelp reviews and Gutenberg prose (accents, dashes, curly quotes), from any thread, and a
    text longer than the first buffer."""
    import threading

    import blingfire

    yelp = (shared_data / "yelp" / "shen2017" / "sentiment.test.0").read_text().splitlines()
    book = shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz"
    texts = yelp[:2000] + [s.text for _, s in zip(range(2000), read_sentences([book], split=True))]
    texts += ["naïve café — “quoted” 東京 🙂 ok", " ".join(yelp[:3000])]  # last: ~150 kB
    assert len(texts[-1].encode()) * 3 > 1 << 16
    for text in texts:
        assert tokenize(text) == blingfire.text_to_words(text).split()
    other: list[list[str]] = []
    thread = threading.Thread(target=lambda: other.extend(tokenize(t) for t in texts[:50]))
    thread.start()
    thread.join()
    assert other == [blingfire.text_to_words(t).split() for t in texts[:50]]


def test_vocab_is_frequency_ranked_deterministic_and_truncates(tmp_path: Path) -> None:
    v = Vocab.build([["b", "a", "a", "c", "b", "a"], ["d"]], size=2)
    assert v.words == ["<pad>", "<unk>", "a", "b"]
    assert v.encode(["a", "zzz", "b", "a"], max_len=3) == [2, 1, 3]
    assert v.encode([], max_len=3) == [1]
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json").words == v.words
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ModelError):
        Vocab.load(tmp_path / "bad.json")


def test_case_fallback_is_made_only_when_a_word_is_missing_as_written() -> None:
    v = Vocab(["<pad>", "<unk>", "Paris", "paris", "dog"])
    assert v.encode(["Paris", "dog"], 5, fold_case=True) == [2, 4]
    assert "folded" not in vars(v)  # every word known as written: no casefolded map built
    assert v.encode(["PARIS", "Dog", "cat"], 5, fold_case=True) == [2, 4, 1]  # most frequent
    assert "folded" in vars(v)


def test_encoding_a_token_table_gives_each_text_s_ids() -> None:
    """`Vocab.encode_table` of many texts at once: each text's `encode(tokens, max_len,
    fold_case=True)` (casings, `<pad>`/`<unk>` typed, cuts at `max_len`, an empty text's
    [<unk>]), and where <unk> stands for a token, with the token: not for an empty text."""
    v = Vocab(["<pad>", "<unk>", "Paris", "paris", "dog", "London"])
    lists = [[], ["dog", "Dog", "DOG"], ["<pad>", "<unk>", "cat"], ["london", "PARIS", "paris"],
             ["dog"] * 5 + ["London"], ["Paris"], [], ["cat", "cat", "Cat"]]
    table = split_table([" ".join(t).encode() for t in lists])
    ids, lengths, at, unknown = v.encode_table(table, max_len=4)
    expected = [v.encode(t, 4, fold_case=True) for t in lists]
    assert [a.tolist() for a in np.split(ids, np.cumsum(lengths)[:-1])] == expected
    assert ids.dtype == np.int32 and lengths == [len(e) for e in expected]
    flat_tokens = [t for tokens in lists for t in (tokens[:4] or [""])]
    assert at == [j for j, t in enumerate(flat_tokens) if t and ids[j] == 1]
    assert unknown == [flat_tokens[j] for j in at] == ["<pad>", "<unk>", "cat", "cat", "cat",
                                                         "Cat"]


def test_a_token_table_splits_texts_as_str_split() -> None:
    """Tokens between, before and after runs of spaces; texts with none; other bytes turned
    into spaces by a translation table."""
    texts = ["a b", "  a  b  ", "", " ", "é ß", "x", "a-b"]
    table = split_table([t.encode() for t in texts])
    assert table.distinct == ["a", "b", "é", "ß", "x", "a-b"]
    assert table.counts.tolist() == [len(t.split()) for t in texts]
    assert [table.distinct[j] for j in table.place.tolist()] == [w for t in texts
                                                                 for w in t.split()]
    dashes = split_table([b"a-b"], bytes(32 if c == ord("-") else c for c in range(256)))
    assert dashes.distinct == ["a", "b"] and dashes.counts.tolist() == [2]


def test_blingfire_separates_tokens_by_single_spaces_whatever_the_whitespace() -> None:
    """What `token_table` relies on to split BlingFire's output at spaces: every character
    Python's `str.split()` splits at, and control characters, come out as one space."""
    odd = [chr(c) for c in range(0x110000) if chr(c).isspace() or c < 32 or c == 0x7F]
    for c in odd:
        out = tokenize(f"{c}a{c}{c}b{c}")
        assert out == ["a", "b"], repr(c)
        assert token_table([f"{c}a{c}{c}b{c}"]).distinct == ["a", "b"], repr(c)
    texts = [f"x{c}y" for c in odd] + ["", " ", "Don't stop, Mr. Smith!"]
    table = token_table(texts)
    assert table.counts.tolist() == [len(tokenize(t)) for t in texts]
    assert [table.distinct[j] for j in table.place.tolist()] == [w for t in texts
                                                                 for w in tokenize(t)]


def test_token_corpus_round_trips_the_text(shared_data: Path, tmp_path: Path) -> None:
    book = shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz"
    tc = TokenCorpus.build([str(book)], tmp_path / "tc", split=True, vocab_size=50_000, max_len=50)
    sents = list(read_sentences([book], split=True))
    assert len(tc) == len(sents)
    ids, lengths, _ = tc.batch(100, 110)
    for row, n, s in zip(ids, lengths, sents[100:110]):
        assert [tc.vocab.words[i] for i in row[:n]] == tokenize(s.text)[:50]
    assert TokenCorpus.build([str(book)], tmp_path / "tc", True, 50_000, 50).meta == tc.meta


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenizer_and_splitter_never_fail_on_arbitrary_unicode(text: str) -> None:
    tokens = tokenize(text)
    assert all(t and not any(c.isspace() for c in t) for t in tokens)
    for offset, sentence in split_sentences(text):
        assert 0 <= offset <= len(text) and sentence == sentence.strip() and sentence


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"))), min_size=1, max_size=8
    )
)
def test_reader_round_trips_arbitrary_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str]
) -> None:
    f = tmp_path_factory.mktemp("h") / "t.txt"
    clean = [" ".join(ln.split()) for ln in lines]
    f.write_text("\n".join(clean) + "\n", encoding="utf-8")
    expected = [ln for ln in clean if ln.strip()]
    if not expected:
        with pytest.raises(InputError):
            list(read_sentences([f]))
        return
    assert [s.text for s in read_sentences([f])] == [ln.strip() for ln in expected]


def test_corpus_signature_follows_contents_not_paths_or_times(shared_data, tmp_path):
    """A corpus copied afresh (a new session's data mount, another machine) is the same
    corpus, so `--resume` accepts it; a changed byte makes it another."""
    import os
    import shutil

    from qtsearch.text.token_corpus import corpus_signature

    book = shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz"
    copy = tmp_path / "elsewhere" / book.name
    copy.parent.mkdir()
    shutil.copyfile(book, copy)
    os.utime(copy, ns=(1, 1))
    assert corpus_signature([book], True, 100, 50) == corpus_signature([copy], True, 100, 50)
    assert corpus_signature([book], True, 100, 50) != corpus_signature([book], False, 100, 50)
    with open(copy, "ab") as f:
        f.write(b"\n")
    assert corpus_signature([book], True, 100, 50) != corpus_signature([copy], True, 100, 50)


def test_the_sentences_digest_keeps_the_cache_keys_already_on_disk() -> None:
    """The analogy pool's and the teacher's vector caches are named by it: a changed digest
    would orphan them."""
    assert sentences_digest(["a man", "plays"]) == "8132306dae17fd18"
    assert sentences_digest(["a man", "plays"]) != sentences_digest(["plays", "a man"])
