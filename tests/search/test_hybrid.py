"""Search modes, fusion, filters and unknown words on a real index built from real Austen text
(tests/query_fixtures.py), checked against exhaustive reference answers."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import as_built

from qtsearch.core.errors import InputError, UnusableIndex, UsageError
from qtsearch.index import backend as backend_module
from qtsearch.index.store import MetadataStore
from qtsearch.search import searcher as searcher_module
from qtsearch.search.fusion import convex, rrf, spread
from qtsearch.search.lexical import LexicalSearch, Stems, query_words
from qtsearch.search.searcher import MODES, Searcher

#: Text that is FTS5 query syntax, quoting or punctuation: never an error, never a crash.
HOSTILE = ['"', '""', "'", "AND", "OR NOT", "NEAR(a b)", "text:Emma", "Emma*", "^Emma", "-",
           "(((", "a) OR (b", "*", ":", "Emma's \"friend\"", "\\", "%_", "😀 Emma", "NULL",
           "Emma\x00Harriet", "ünïcödé Émma"]


@pytest.fixture(scope="module")
def index(api) -> Searcher:
    return api


@pytest.fixture(scope="module")
def fts_store(index, tmp_path_factory) -> MetadataStore:
    """The test index's rows as an index built before the BM25 files holds them: an FTS5
    table, no BM25 files beside it."""
    db = tmp_path_factory.mktemp("fts") / "meta.sqlite"
    shutil.copyfile(index.path / "meta.sqlite", db)
    with MetadataStore.open(db, readonly=False) as store:
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    store = MetadataStore.open(db)
    yield store
    store.close()


@pytest.fixture(scope="module")
def rows(index) -> list[dict]:
    got = index.store.get(range(index.count))
    return [got[i] for i in range(index.count)]


def _ids(hits) -> list[int]:
    return [h.id for h in hits]


def test_the_test_index_has_bm25_files_no_full_text_table_and_defaults_to_hybrid(index):
    assert index.lexical.bm25 is not None and not index.lexical.fts
    assert index.default_mode == "hybrid"
    assert "hybrid search" in index.describe()


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_a_stored_sentence_first(index, rows, mode):
    text = rows[1234]["text"]
    hits = index.search(text, k=5, mode=mode)[0]
    assert hits[0].text == text
    assert set(hits[0].legs) == ({"semantic", "lexical"} if mode == "hybrid" else {mode})
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_lexical_finds_a_rare_word_wherever_it_is(index, rows):
    """Every sentence holding a word that occurs a few times is found, and nothing else."""
    word = "Hartfield"
    holding = {r["id"] for r in rows if word.lower() in query_words(r["text"])}
    assert 2 <= len(holding) <= 40
    hits = index.search(word.lower(), k=len(holding) + 10, mode="lexical")[0]
    assert set(_ids(hits)) == holding


def test_hybrid_finds_a_paraphrase_by_its_words(index, rows):
    """Words of a stored sentence, reordered and lower-cased: lexical and hybrid rank it first."""
    target = next(r for r in rows if len(query_words(r["text"])) >= 8 and r["id"] > 300)
    words = query_words(target["text"])
    shuffled = " ".join(reversed(words))
    assert index.search(shuffled, k=3, mode="lexical")[0][0].id == target["id"]
    assert index.search(shuffled, k=3, mode="hybrid")[0][0].id == target["id"]


def test_hybrid_legs_are_the_legs_own_scores(index):
    query = "Mr. Knightley walked in the garden with Emma."
    semantic = {h.id: h.score for h in index.search(query, k=50, mode="semantic")[0]}
    lexical = {h.id: h.score for h in index.search(query, k=50, mode="lexical")[0]}
    for h in index.search(query, k=10, mode="hybrid")[0]:
        assert h.id in semantic or h.id in lexical
        if h.id in semantic:
            assert h.legs["semantic"] == pytest.approx(semantic[h.id], abs=1e-5)
        if h.id in lexical:
            assert h.legs["lexical"] == pytest.approx(lexical[h.id], rel=1e-9)
        assert h.to_dict()["legs"] == h.legs


def test_the_lexical_leg_in_a_thread_or_inline_gives_the_same_hits(index, monkeypatch):
    queries = ["Mr. Knightley walked in the garden with Emma.", "a letter from Jane Fairfax"]
    submitted = []
    submit = index._pool.submit
    monkeypatch.setattr(index._pool, "submit", lambda fn: submitted.append(fn) or submit(fn))
    inline = index.search(queries, k=10, mode="hybrid")
    assert not submitted  # a small index: the leg runs in the caller's thread
    monkeypatch.setattr(searcher_module, "LEGS_BESIDE_FROM", 0)
    beside = index.search(queries, k=10, mode="hybrid")
    assert len(submitted) == 1
    assert [[(h.id, h.score) for h in r] for r in beside] == \
        [[(h.id, h.score) for h in r] for r in inline]


def test_rrf_fusion_is_available(index, rows):
    rrf = dataclasses.replace(index.settings, fusion="rrf")
    hits = index.search(rows[77]["text"], k=3, mode="hybrid", settings=rrf)[0]
    assert hits[0].id == 77 and hits[0].score == pytest.approx(2 / 61)


@pytest.mark.parametrize("text", HOSTILE)
def test_any_text_is_a_safe_lexical_query(index, text):
    hits = index.search(text, k=5, mode="lexical")[0]
    assert len(hits) <= 5


def test_frequent_words_drop_out_of_the_full_text_leg(fts_store):
    """Over an FTS5 table, words matching more rows than the budget are left out when rarer
    ones remain: a query with stop-words ranks as the rare word alone; stop-words alone still
    find something."""
    search = LexicalSearch(fts_store, budget=100)
    assert search.bm25 is None and search.fts
    assert search.rows_of("the") == 101 and search.rows_of("hartfield") <= 100
    assert search.search("the of and to Hartfield", 10) == search.search("Hartfield", 10)
    only_frequent = search.search("the of and", 10)
    assert len(only_frequent) == 10
    assert search.search("zzyzx qwxzv", 10) == []


def test_word_counts_are_learned_in_one_pass(fts_store, monkeypatch):
    """The warm-up's pass counts every term of the index: a word that is its own Porter stem
    needs no lookup, and the counts agree with the bounded lookups (capped at the budget); a
    word the stemmer changes ("knightley" is indexed as "knightlei") is looked up, correctly."""
    words = ("the", "and", "emma", "hartfield", "weston")
    fresh = LexicalSearch(fts_store, budget=100)
    expected = {w: fresh.rows_of(w) for w in (*words, "knightley")}
    learned = LexicalSearch(fts_store, budget=100)
    learned.learn_counts()
    assert learned.rows_of("knightley") == expected["knightley"] > 0
    monkeypatch.setattr(learned.store, "term_rows", lambda *a: pytest.fail("looked up"))
    assert {w: learned.rows_of(w) for w in words} == {w: expected[w] for w in words}
    assert expected["the"] == 101 and 0 < expected["hartfield"] <= 100


def test_learned_counts_plan_as_the_cold_lookups(tmp_path):
    """A word that is another word's stem counts by its own stem once counts are learned:
    "nothingness" is indexed as "nothing", while "nothing" is searched as "noth"."""
    texts = ["Nothingness was vast.", *(f"There was nothing in box {i}." for i in range(5)),
             "Dan’s dog barked.", "It rained on the café."]
    with MetadataStore.create(tmp_path / "m.sqlite") as store:
        store.insert_many([(i, t, "t.txt", i, 0, i) for i, t in enumerate(texts)])
        store.fts_create()
        store.fts_fill(0)
    words = ("nothing", "nothingness", "dan’s", "rained", "cafe", "Café", "absent")
    with MetadataStore.open(tmp_path / "m.sqlite") as store:
        cold = LexicalSearch(store, budget=3)
        warm = LexicalSearch(store, budget=3)
        warm.learn_counts()
        assert {w: warm.rows_of(w) for w in words} == {w: cold.rows_of(w) for w in words}
        assert [warm.rows_of(w) for w in words] == [4, 1, 1, 1, 1, 1, 0]
        assert warm.plan("nothing nothingness") == cold.plan("nothing nothingness")


def test_words_are_stemmed_in_one_pass_and_ahead_by_the_warm_up(tmp_path):
    """A query's new words go through the tokenizer together, with the answers one at a
    time gives; the warm-up stems the words it is given (the model's), so a query made of
    them never reaches the tokenizer."""
    words = ["nothing", "nothingness", "dan’s", "rained", "café", "", "absent", "nothing"]
    single = Stems()
    assert Stems().of(words) == {w: single.of([w])[w] for w in words}
    assert Stems().of(words)["rained"] == "rain" and Stems().of(words)["dan’s"] is None
    with MetadataStore.create(tmp_path / "m.sqlite") as store:
        store.insert_many([(0, "It rained on the café.", "t.txt", 0, 0, 0)])
        store.fts_create()
        store.fts_fill(0)
    with MetadataStore.open(tmp_path / "m.sqlite") as store:
        warm = LexicalSearch(store)
        warm.learn_counts(["Rained", "Café"])
        warm._stems._db = None  # any tokenizer call would fail now
        assert warm.search("rained café", 5)[0][0] == 0


def test_fusions_on_known_scores():
    assert list(rrf({"a": {1: 0.9, 2: 0.5}, "b": {2: 9.0, 3: 1.0}})) == [2, 1, 3]
    fused, sem, lex = convex({1: 0.9, 2: 0.5}, {2: 9.0, 3: 1.0}, lexical_complete=True,
                             cosine_of=lambda ids: np.array([0.1] * len(ids)))
    assert list(fused) == [2, 1, 3]
    assert sem == {1: 0.9, 2: 0.5, 3: 0.1} and lex == {1: 0.0, 2: 9.0, 3: 1.0}
    # an incomplete lexical leg fills in its lowest score; an unknown cosine the lowest one
    _, sem, lex = convex({1: 0.9}, {2: 9.0, 3: 1.0}, lexical_complete=False,
                         cosine_of=lambda ids: None)
    assert lex[1] == 1.0 and sem == {1: 0.9, 2: 0.9, 3: 0.9}
    assert convex({}, {}, True, lambda ids: None) == ({}, {}, {})


def test_a_spread_is_numpys_mean_and_std_to_the_bit():
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 30, 129, 1000):
        for _ in range(50):
            values = rng.standard_normal(n) * rng.uniform(0.01, 100) + rng.uniform(-50, 50)
            assert spread(values) == (float(values.mean()), float(values.std()))
    assert spread(np.zeros(0)) == (0.0, 0.0)


# -- filters -----------------------------------------------------------------------------------

def _brute_force(index, rows, query: str, keep) -> list[int]:
    ids = np.array([r["id"] for r in rows if keep(r)])
    scores = index.backend.reconstruct(ids) @ index.embed([query])[0]
    return ids[np.argsort(-scores, kind="stable")].tolist()


@pytest.mark.parametrize("over_fetch", [False, True])
def test_semantic_filters_equal_brute_force(index, rows, monkeypatch, over_fetch):
    if over_fetch:  # the subset too big to score on its own: through the index, widened
        monkeypatch.setattr(backend_module, "SUBSET_BYTES", 0)
    query = "She was very happy to see him again."
    for where, keep in [({"doc": 1}, lambda r: r["doc"] == 1),
                        ({"doc": 0, "line": 40}, lambda r: r["doc"] == 0 and r["line"] == 40),
                        ({"position": "7"}, lambda r: r["position"] == 7)]:
        truth = _brute_force(index, rows, query, keep)
        hits = index.search(query, k=8, mode="semantic", where=where)[0]
        assert _ids(hits) == truth[:8], where
        assert all(keep(h.to_dict()) for h in hits)


def test_lexical_and_hybrid_filters_keep_only_matching_rows(index, rows):
    query = "Emma and Harriet walked to Hartfield."
    everything = index.search(query, k=index.count, mode="lexical")[0]
    filtered = index.search(query, k=10, mode="lexical", where={"doc": 0})[0]
    assert _ids(filtered) == [h.id for h in everything if h.doc == 0][:10]
    hybrid = index.search(query, k=10, mode="hybrid", where={"doc": 1})[0]
    assert hybrid and all(h.doc == 1 for h in hybrid)


def test_source_filters_by_file_name_or_path(index, rows):
    source = rows[0]["source"]
    name = Path(source).name
    for value in (source, name):
        hits = index.search("Emma", k=5, mode="semantic", where={"source": value})[0]
        assert len(hits) == 5
    assert index.search("Emma", k=5, where={"source": "other.txt"})[0] == []
    assert index.search("Emma", k=5, where={"source": name[1:]})[0] == []  # whole names only


def test_bad_filters_are_one_clear_error(index):
    with pytest.raises(UsageError, match=r"cannot filter on 'colour'.*source"):
        index.search("Emma", where={"colour": "red"})
    with pytest.raises(UsageError, match="whole number"):
        index.search("Emma", where={"doc": "first"})
    with pytest.raises(UsageError, match="unknown search mode"):
        index.search("Emma", mode="fuzzy")


# -- unknown words -----------------------------------------------------------------------------

def test_case_folding_finds_words_typed_in_another_case(index):
    vocab = index.encoder.vocab
    word = next(w for w in vocab.words[2:200] if w.istitle() and w.lower() not in vocab.index)
    assert vocab.encode([word.lower()], 5) == [1]  # exact lookup: unknown
    assert index.encoder.token_ids(word.lower()) == index.encoder.token_ids(word)
    assert index.encoder.known_words(word.upper()) == 1


def test_a_mostly_foreign_query_says_so_and_searches_its_words(index, caplog):
    query = "Quelle journée magnifique pour Emma à Hartfield"
    with caplog.at_level(logging.WARNING, logger="qtsearch"):
        hybrid = index.search(query, k=5)[0]
    assert hybrid.note and "unknown to the model" in hybrid.note and "lexical" in hybrid.note
    assert hybrid.note in caplog.text
    assert hybrid and all(set(h.legs) == {"lexical"} for h in hybrid)
    semantic = index.search(query, k=5, mode="semantic")[0]
    assert "unreliable" in semantic.note
    assert index.search("Emma walked to Hartfield.", k=5)[0].note is None
    with pytest.raises(InputError, match="vocabulary"):
        index.search("Qwxzv Blorptangle", k=5, mode="semantic")
    assert index.search("Qwxzv Blorptangle", k=5)[0] == []  # hybrid: no word matches
    assert index.search("§§§ ¤", k=5, mode="hybrid")[0] == []  # no word at all: no vector


# -- indexes built before the lexical files -------------------------------------------------------

def without_lexical(folder: Path) -> None:
    """The index as one built before BM25 files and the full-text table: neither."""
    shutil.rmtree(folder / "bm25")
    as_built(folder)


def test_an_index_without_bm25_files_or_table_opens_for_semantic_search(flat, tmp_path, caplog):
    old = shutil.copytree(flat, tmp_path / "old")
    without_lexical(old)
    with caplog.at_level(logging.WARNING, logger="qtsearch"):
        idx = Searcher.open(old)
    with idx:
        assert caplog.text.count("rebuild it with `qtsearch build-index`") == 1
        assert idx.default_mode == "semantic"
        assert set(idx.search("Emma was happy.", k=3)[0][0].legs) == {"semantic"}
        for mode in ("lexical", "hybrid"):
            with pytest.raises(UnusableIndex, match="neither BM25 files nor a full-text table"):
                idx.search("Emma", mode=mode)


# -- fitted vectors ------------------------------------------------------------------------------

def test_queries_go_through_the_index_transform(index, rows):
    """The index holds transformed vectors: a query is encoded, then transformed the same way,
    so a stored sentence's query vector equals its stored vector."""
    from qtsearch.index.transform import VectorTransform

    transform = VectorTransform.load(index.path)
    assert transform is not None and index.transform is not None  # build-index's default
    text = rows[321]["text"]
    raw = index.encoder.encode([text], normalize=True)
    np.testing.assert_allclose(index.embed([text]), transform.apply(raw), atol=1e-6)
    np.testing.assert_allclose(index.embed([text])[0], index.backend.reconstruct(
        np.array([321]))[0], atol=2e-3)


def test_a_transform_of_other_dimensions_is_refused(flat, tmp_path):
    from qtsearch.index.transform import VectorTransform

    broken = shutil.copytree(flat, tmp_path / "index")
    wrong = np.random.default_rng(0).normal(size=(10, 7)).astype(np.float32)
    VectorTransform.fit(wrong, "centre").save(broken)
    # without the manifest's file checksums (as older indexes), which would refuse it first
    manifest = json.loads((broken / "manifest.json").read_text())
    manifest.pop("files", None)
    (broken / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(UnusableIndex, match=r"dimension mismatch.*transform 7->7"):
        Searcher.open(broken)


def test_an_index_of_the_old_format_still_opens(shared_data, tiny_model, tmp_path):
    """Built before fitted vectors and lexical search: no transform files, no BM25 files.
    It opens (one warning), searches semantically, and its answers are the exact ones."""
    from query_fixtures import corpus_file

    from qtsearch.indexing.pipeline import IndexConfig, build_index

    out = tmp_path / "old"
    build_index(IndexConfig(corpus=[str(corpus_file(shared_data, tmp_path))],
                            model=str(tiny_model), out=str(out), index="flat", fit="none",
                            device="cpu", precision="fp32"))
    without_lexical(out)
    assert not list(out.glob("transform.*"))
    with Searcher.open(out) as idx:
        assert idx.transform is None and idx.default_mode == "semantic"
        query = "She was very happy to see him again."
        stored = idx.backend.reconstruct(np.arange(idx.count))
        want = np.argsort(-(stored @ idx.encoder.encode([query], normalize=True)[0]))[:5]
        assert _ids(idx.search(query, k=5)[0]) == want.tolist()


def test_a_query_matching_only_stop_words_is_noted_and_ranked_by_meaning_alone(index):
    """BM25 over function words ranks noise with confident scores: hybrid leaves that leg out
    (every hit semantic only, in the semantic mode's order), lexical finds nothing, and both
    modes say why."""
    text = "xyzzyq plughq on the of"
    assert index.lexical.stop_words_only(text)
    hybrid = index.search(text, k=5, mode="hybrid")[0]
    semantic = index.search(text, k=5, mode="semantic")[0]
    assert [h.id for h in hybrid] == [h.id for h in semantic]
    assert all(set(h.legs) == {"semantic"} for h in hybrid)
    assert "stop-words" in hybrid.note and "meaning alone" in hybrid.note
    lexical = index.search(text, k=5, mode="lexical")[0]
    assert lexical == [] and "none of its words (stop-words aside)" in lexical.note
    assert semantic.note is None or "stop-words" not in semantic.note


def test_a_query_with_one_indexed_content_word_keeps_its_lexical_leg(index):
    hits = index.search("Hartfield on the of", k=5, mode="hybrid")[0]
    assert not index.lexical.stop_words_only("Hartfield on the of")
    assert hits.note is None or "stop-words" not in hits.note
    assert any("lexical" in h.legs for h in hits)
