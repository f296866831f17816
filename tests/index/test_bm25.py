"""The lexical leg is exact BM25: the same ranking as BM25 computed by its definition in this
file, after a build, after `add`, under filters, and at Wikipedia scale never empty when a query
word matches. All on real data: SciFact abstracts and the shared Wikipedia shards."""

from __future__ import annotations

import gzip
import json
import math
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import UnusableIndex
from qtsearch.index import bm25, bm25_terms
from qtsearch.index.manifest import write_manifest
from qtsearch.index.store import MetadataStore
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.derive import build_from_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.lexical import LexicalSearch
from qtsearch.search.searcher import Searcher

K1, B = 1.2, 0.75
QUESTIONS = ["What is the capital of Australia?", "A war broke out between the two countries.",
             "who invented the telephone?", "How do vaccines work?",
             "He won the Nobel Prize in Physics.", "What causes earthquakes?"]


class Reference:
    """BM25 by its definition, over term lists (the same terms the index uses)."""

    def __init__(self, docs: dict[int, list[str]]):
        self.tfs = {i: Counter(d) for i, d in docs.items()}
        self.lengths = {i: len(d) for i, d in docs.items()}
        self.n = len(docs)
        self.avglen = sum(self.lengths.values()) / self.n
        self.df = Counter(t for tf in self.tfs.values() for t in tf)

    def top(self, terms: list[str], k: int, allowed: set[int] | None = None,
            boosts: dict[str, float] | None = None) -> list[tuple[int, float]]:
        q = [t for t in dict.fromkeys(terms) if t in self.df]
        idf = {t: math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
               * (boosts or {}).get(t, 1.0) for t in q}
        scores = {}
        for i, tf in self.tfs.items():
            if allowed is not None and i not in allowed:
                continue
            norm = K1 * (1 - B + B * self.lengths[i] / self.avglen)
            s = sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + norm) for t in q if t in tf)
            if s > 0:
                scores[i] = s
        return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def assert_same_ranking(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    """Same scores (to float32 precision) and the same rows in the same order, except among
    rows whose scores are equal to that precision (duplicates), which may come in any order."""
    assert len(got) == len(want), (got, want)
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5, atol=1e-6)
    ws = [s for _, s in want]
    for j, ((gi, _), (wi, _)) in enumerate(zip(got, want, strict=True)):
        tied = any(abs(ws[j] - ws[m]) < 1e-4 * max(1.0, ws[j])
                   for m in (j - 1, j + 1) if 0 <= m < len(ws))
        if not tied:
            assert gi == wi, (j, got, want)
    last = ws[-1] if ws else 0.0
    above = 1e-4 * max(1.0, last)
    assert {i for i, s in got if s > last + above} == {i for i, s in want if s > last + above}


@pytest.fixture(scope="module")
def scifact(shared_data: Path) -> tuple[list[str], list[str]]:
    """SciFact's abstracts (title and text, one line each) and its first 40 train claims."""
    folder = shared_data / "beir" / "scifact"
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    texts = [" ".join(f"{d['title']} {d['text']}".split()) for d in docs]
    queries = [json.loads(line)["text"] for line in
               (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:40]]
    return texts, queries


@pytest.fixture(scope="module")
def scifact_files(scifact, tmp_path_factory) -> tuple[bm25.Bm25Index, Reference]:
    """BM25 files of every SciFact abstract, opened, and the reference over the same terms."""
    texts, _ = scifact
    folder = tmp_path_factory.mktemp("scifact-bm25")
    bm25.build(folder, enumerate(texts))
    index = bm25.Bm25Index.open(folder)
    assert index is not None
    return index, Reference({i: bm25.Analyzer().terms(t) for i, t in enumerate(texts)})


def test_files_rank_as_bm25_by_its_definition(scifact, scifact_files):
    texts, queries = scifact
    index, ref = scifact_files
    assert index.count == len(texts)
    terms = index.terms
    assert terms == sorted(terms) and [index.term_id(t) for t in terms] == list(range(len(terms)))
    assert index.term_id("zzzunknownword") is None and index.term_id("") is None
    analyzer = bm25.Analyzer()
    for q in [*queries, *QUESTIONS, "glaucoma statin", "zzzunknownword"]:
        terms = index.query_terms(q)
        assert_same_ranking(index.top(terms, 10), ref.top(analyzer.terms(q), 10))
    # a filter: exactly the best allowed rows
    allowed = np.arange(0, len(texts), 3)
    for q in queries[:10]:
        got = index.top(index.query_terms(q), 10, allowed)
        assert_same_ranking(got, ref.top(analyzer.terms(q), 10, set(allowed.tolist())))


def test_term_ids_are_remembered_and_forgotten_past_the_bound(scifact, tmp_path, monkeypatch):
    texts, _ = scifact
    bm25.build(tmp_path, enumerate(texts[:300]))
    index = bm25.Bm25Index.open(tmp_path)
    terms = index.terms
    searched = []
    find = bm25.find_line
    monkeypatch.setattr(bm25, "find_line", lambda *a: searched.append(a[-1]) or find(*a))
    monkeypatch.setattr(bm25, "TERMS_KEPT", 50)
    asked = [*terms[:40], "zzzunknownword"]
    want = [*range(40), None]
    assert [index.term_id(t) for t in asked] == want and searched == asked
    assert [index.term_id(t) for t in asked] == want and searched == asked  # remembered
    later = terms[40:100]
    assert [index.term_id(t) for t in later] == list(range(40, 100))
    assert len(index._term_ids) <= 50  # forgotten all at the bound, then filled again
    assert [index.term_id(t) for t in asked] == want


def test_appending_gives_the_files_of_one_build(scifact, tmp_path):
    texts, queries = scifact
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    bm25.build(whole, enumerate(texts))
    cut = 3000
    bm25.build(parts, enumerate(texts[:cut]))
    assert bm25.append(parts, ((cut + i, t) for i, t in enumerate(texts[cut:]))) == \
        len(texts) - cut
    for name in bm25.FILES:  # byte for byte the files of one build
        got, want = parts / bm25.FOLDER / name, whole / bm25.FOLDER / name
        assert got.read_bytes() == want.read_bytes(), name
    a, b = bm25.Bm25Index.open(whole), bm25.Bm25Index.open(parts)
    assert a is not None and b is not None
    for q in queries:
        terms = a.query_terms(q)
        assert a.top(terms, 20) == b.top(terms, 20)


def test_worker_processes_write_the_files_of_one_process(scifact, tmp_path, monkeypatch):
    """A big store is analysed by worker processes reading chunks of it (here chunks of 700
    rows, two workers): the same files as analysing every row here, for a build and for the
    rows an `add` appends."""
    texts, _ = scifact
    db = tmp_path / "meta.sqlite"
    with MetadataStore.create(db) as store:
        store.insert_many([(i, t, "s.txt", i, i, 0) for i, t in enumerate(texts)])
    monkeypatch.setattr(bm25_terms, "CHUNK", 700)
    here, workers = tmp_path / "here", tmp_path / "workers"
    bm25.build(here, enumerate(texts))
    assert bm25.build_from(workers, bm25_terms.analysed_store(db, 0, len(texts), 2)) == \
        len(texts)
    for name in bm25.FILES:
        assert (workers / bm25.FOLDER / name).read_bytes() == \
            (here / bm25.FOLDER / name).read_bytes(), name
    cut = 2000
    appended = tmp_path / "appended"
    bm25.build(appended, enumerate(texts[:cut]))
    monkeypatch.setattr(bm25, "PARALLEL_ROWS", 1000)  # write_for's choice: the workers
    assert bm25.write_for(appended, db, cut) == len(texts) - cut
    for name in bm25.FILES:
        assert (appended / bm25.FOLDER / name).read_bytes() == \
            (here / bm25.FOLDER / name).read_bytes(), name


def test_a_gap_in_the_store_is_refused_by_the_workers(scifact, tmp_path, monkeypatch):
    texts, _ = scifact
    db = tmp_path / "meta.sqlite"
    with MetadataStore.create(db) as store:
        store.insert_many([(i, t, "s.txt", i, i, 0) for i, t in enumerate(texts[:3000])
                           if i != 1234])
    monkeypatch.setattr(bm25_terms, "CHUNK", 700)
    with pytest.raises(UnusableIndex, match="consecutive ids from 700"):
        bm25.build_from(tmp_path, bm25_terms.analysed_store(db, 0, 2999, 2))


def test_stop_words_do_not_decide_a_hit():
    analyzer = bm25.Analyzer()
    assert analyzer.terms("What is the capital of Australia?") == ["capit", "australia"]
    assert analyzer.terms("who invented the telephone?") == ["invent", "telephon"]
    assert analyzer.terms("How do vaccines work?") == ["vaccin", "work"]
    assert analyzer.terms("He won the Nobel Prize") == ["won", "nobel", "prize"]
    assert analyzer.terms("Café CAFE café") == ["cafe", "cafe", "cafe"]


# -- through build-index, add and Searcher.search -----------------------------------------------

def store_terms(folder: Path) -> dict[int, list[str]]:
    analyzer = bm25.Analyzer()
    conn = sqlite3.connect(folder / "meta.sqlite")
    try:
        return {i: analyzer.terms(t) for i, t in conn.execute("SELECT id, text FROM sentences")}
    finally:
        conn.close()


def lexical(idx: Searcher, q: str, k: int, where: dict | None = None) -> list[tuple[int, float]]:
    return [(h.id, h.score) for h in idx.search(q, k, mode="lexical", where=where)[0]]


@pytest.fixture(scope="module")
def scifact_index(scifact, tiny_model, tmp_path_factory) -> Path:
    texts, _ = scifact
    root = tmp_path_factory.mktemp("bm25")
    (root / "first.txt").write_text("\n".join(texts[:1500]) + "\n", encoding="utf-8")
    out = root / "index"
    build_index(IndexConfig(corpus=[str(root / "first.txt")], model=str(tiny_model),
                            out=str(out), index="flat", device="cpu"))
    return out


def test_index_search_is_exact_bm25_and_add_keeps_it(scifact, scifact_index, tmp_path):
    texts, queries = scifact
    with Searcher.open(scifact_index) as idx:
        assert idx.lexical is not None and idx.lexical.bm25 is not None
        ref = Reference(store_terms(scifact_index))
        for q in queries[:20]:
            assert_same_ranking(lexical(idx, q, 10), ref.top(bm25.Analyzer().terms(q), 10))
    more = tmp_path / "more.txt"
    more.write_text("\n".join(texts[1500:2300]) + "\n", encoding="utf-8")
    add_to_index(scifact_index, [str(more)], device="cpu")
    with Searcher.open(scifact_index) as idx:
        assert idx.lexical is not None and idx.lexical.bm25 is not None
        assert idx.lexical.bm25.count == idx.count == 2300
        ref = Reference(store_terms(scifact_index))
        for q in queries[:20]:
            assert_same_ranking(lexical(idx, q, 10), ref.top(bm25.Analyzer().terms(q), 10))
        # a filter on the added file: the best of its rows only, exactly
        allowed = {i for i in range(idx.count) if i >= 1500}
        for q in queries[:10]:
            got = lexical(idx, q, 10, {"source": "more.txt"})
            assert_same_ranking(got, ref.top(bm25.Analyzer().terms(q), 10, allowed))


def test_an_index_without_the_files_searches_its_full_text_table(scifact, scifact_index,
                                                                  tmp_path):
    texts, queries = scifact
    old = tmp_path / "old"
    shutil.copytree(scifact_index, old)
    # as an index built before the files: an FTS5 table instead, the files not in its record
    shutil.rmtree(old / bm25.FOLDER)
    with MetadataStore.open(old / "meta.sqlite", readonly=False) as store:
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    manifest = json.loads((old / "manifest.json").read_text(encoding="utf-8"))
    manifest["files"] = {name: v for name, v in manifest.get("files", {}).items()
                         if not name.startswith(bm25.FOLDER + "/")}
    write_manifest(old, manifest)
    with Searcher.open(old) as idx:
        assert idx.lexical is not None and idx.lexical.bm25 is None
        hits = idx.search("glaucoma", 5, mode="lexical")[0]
        assert hits and all("glaucoma" in h.text.lower() for h in hits)
    # `add` gives such an index the files, over all its rows
    more = tmp_path / "later.txt"
    more.write_text("\n".join(texts[4000:4100]) + "\n", encoding="utf-8")
    add_to_index(old, [str(more)], device="cpu")
    with Searcher.open(old) as idx:
        assert idx.lexical is not None and idx.lexical.bm25 is not None
        assert idx.lexical.bm25.count == idx.count
        ref = Reference(store_terms(old))
        for q in queries[:5]:
            assert_same_ranking(lexical(idx, q, 10), ref.top(bm25.Analyzer().terms(q), 10))


def test_a_derived_index_gets_the_same_files(scifact_index, tmp_path):
    result = build_from_index(scifact_index, tmp_path / "hnsw", "hnsw")
    for name in ("rows.npy", "weights.npy", "terms.txt"):
        assert (result.path / bm25.FOLDER / name).read_bytes() == \
            (scifact_index / bm25.FOLDER / name).read_bytes()
    with Searcher.open(result.path) as idx:
        assert idx.lexical is not None and idx.lexical.bm25 is not None
        assert idx.lexical.bm25.count == idx.count


def test_boosted_terms_rank_as_bm25_weighted_by_their_boosts(scifact, scifact_files):
    """`boosts` multiply each term's part of a row's score (the lexical feedback's weighted
    query); no boosts is BM25 itself, to the bit."""
    _, queries = scifact
    index, ref = scifact_files
    for n, q in enumerate(queries[:10]):
        terms = index.query_terms(q)
        ids = index.ids_of(terms)
        assert index.top_ids(ids, 10, boosts=[1.0] * len(ids)) == index.top_ids(ids, 10)
        boosts = {t: 0.5 + (j + n) % 3 for j, t in enumerate(terms)}
        got = index.top_ids(ids, 10, boosts=[boosts[index.terms[i]] for i in ids])
        assert_same_ranking(got, ref.top(terms, 10, boosts=boosts))


def test_lexical_feedback_expands_a_query_by_its_first_hits_terms(scifact, scifact_index):
    """With feedback, the lexical leg ranks by BM25 under the RM3 weights of `expanded`: each
    query term keeps 1 − share, the ten likeliest terms of the first FEEDBACK_ROWS hits share
    the rest, the query's weight in all unchanged; without, it is BM25 itself."""
    from qtsearch.search.lexical import FEEDBACK_ROWS, FEEDBACK_TERMS, expanded

    _, queries = scifact
    with MetadataStore.open(scifact_index / "meta.sqlite") as store:
        search = LexicalSearch(store)
        index = search.bm25
        assert index is not None
        ref = Reference(store_terms(scifact_index))
        for q in queries[:10]:
            terms = index.query_terms(q)
            ids = index.ids_of(terms)
            assert search.search(q, 20, feedback=0.0) == index.top_ids(ids, 20)
            first = index.top_ids(ids, FEEDBACK_ROWS)
            texts = store.get([row for row, _ in first])
            weights = expanded(ids, [(texts[r]["text"], s) for r, s in first], index, 0.3)
            assert sum(weights.values()) == pytest.approx(len(ids))
            assert all(weights[i] >= 0.7 - 1e-9 for i in ids)
            added = set(weights) - set(ids)
            assert 0 < len(added) <= FEEDBACK_TERMS
            held = {t for r, _ in first for t in bm25.Analyzer().terms(texts[r]["text"])}
            assert {index.terms[i] for i in added} <= held
            boosts = {index.terms[i]: w for i, w in weights.items()}
            got = search.search(q, 20, feedback=0.3)
            assert got != index.top_ids(ids, 20)
            assert_same_ranking(got, ref.top(list(boosts), 20, boosts=boosts))


def test_queries_only_stop_words_can_match_find_nothing(scifact_index):
    """The files leave stop-words out, and no full-text table ranks them instead: whatever
    such a query would find shares only function words with it."""
    with MetadataStore.open(scifact_index / "meta.sqlite") as store:
        search = LexicalSearch(store)
        assert search.bm25 is not None and not search.fts
        assert search.stop_words_only("what is the") and search.search("what is the", 5) == []
        assert search.search("zzyzx the qwxzv", 5) == []  # no other word of it is indexed
        assert search.search("glaucoma the", 5)  # a content word: found


def test_an_old_index_ranks_stop_word_queries_over_its_full_text_table(scifact_index,
                                                                        tmp_path):
    db = tmp_path / "meta.sqlite"
    shutil.copyfile(scifact_index / "meta.sqlite", db)
    shutil.copytree(scifact_index / bm25.FOLDER, tmp_path / bm25.FOLDER)
    with MetadataStore.open(db, readonly=False) as store:
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    with MetadataStore.open(db) as store:
        search = LexicalSearch(store)
        assert search.bm25 is not None and search.fts
        assert search.search("what is the", 5)  # no content word, yet the words occur
        assert search.search("zzyzx qwxzv", 5) == []


# -- Wikipedia: no empty result at 500k+ rows -------------------------------------------------

@pytest.mark.slow
def test_wikipedia_lexical_answers_every_query_with_a_matching_word(shared_data, tmp_path):
    out = tmp_path / "wiki"
    # the first 70 of the 200 WikiExtractor files, ~510k sentences: the index of the
    # everyday questions; mean GloVe vectors, the fastest real encoder (the lexical leg does
    # not use them)
    files = sorted((shared_data / "wikipedia" / "AA").glob("wiki_*"))[:70]
    build_index(IndexConfig(corpus=[str(f) for f in files], model="glove",
                            out=str(out), index="flat", device="cpu"))
    with Searcher.open(out) as idx:
        assert idx.count >= 500_000
        assert idx.lexical is not None and idx.lexical.bm25 is not None
        for q in QUESTIONS:
            hits = idx.search(q, 5, mode="lexical")[0]
            assert hits, q
            terms = set(idx.lexical.bm25.query_terms(q))
            for h in hits:  # every hit holds a content word of the query
                assert terms & set(bm25.Analyzer().terms(h.text)), (q, h.text)
        top = idx.search("What is the capital of Australia?", 10, mode="lexical")[0]
        assert any("canberra" in h.text.lower() for h in top), [h.text for h in top]
