"""The Python query API on real indexes built by the real builder from real text."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from query_fixtures import small_index
from safetensors.numpy import load_file, save_file

from qtsearch.core.errors import InputError, ModelError, UnusableIndex, UsageError
from qtsearch.encoders.registry import load_encoder
from qtsearch.index.store import MetadataStore
from qtsearch.search.defaults import ALONE_UP_TO
from qtsearch.search.searcher import Hit, Searcher

HIT_KEYS = ["id", "score", "text", "source", "line", "doc", "position", "legs"]
QUERIES = ["She was very happy to see him again.",
           "Mr. Knightley said nothing.",
           "The weather was cold and wet all week."]


@pytest.fixture(scope="module")
def index(api):
    return api


@pytest.fixture(scope="module")
def corpus_vectors(index) -> tuple[list[str], np.ndarray]:
    """Every stored sentence and its vector as the index holds it (flat: exact), for
    exhaustive reference answers."""
    rows = index.store.get(range(index.count))
    texts = [rows[i]["text"] for i in range(index.count)]
    return texts, index.backend.reconstruct(np.arange(index.count))


def _exact(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    scores = vectors @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return order, scores[order]


def _check_against_exact(hits: list[Hit], vectors: np.ndarray, query: np.ndarray) -> None:
    _, scores = _exact(vectors, query, len(hits))
    np.testing.assert_allclose([h.score for h in hits], scores, atol=1e-4)
    # the id of each hit has the score reported (ties may swap equal-score ids)
    np.testing.assert_allclose([vectors[h.id] @ query for h in hits], scores, atol=1e-4)


def test_search_returns_the_exact_neighbours_with_metadata(index, corpus_vectors):
    texts, vectors = corpus_vectors
    results = index.search(QUERIES, k=7, mode="semantic")
    assert len(results) == len(QUERIES)
    queries = index.embed(QUERIES)
    for hits, q in zip(results, queries, strict=True):
        assert len(hits) == 7
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        _check_against_exact(hits, vectors, q)
        for h in hits:
            assert h.text == texts[h.id]
            assert h.source.endswith("austen.txt") and h.line >= 1
            assert h.doc in (0, 1) and h.position >= 0


def test_a_stored_sentence_finds_itself_first(index):
    (record,) = index.get([1234])
    top = index.search([record.text], k=1, mode="semantic")[0][0]
    assert top.text == record.text
    assert top.score == pytest.approx(1.0, abs=1e-4)


def _faiss_threads_seen(idx: Searcher, monkeypatch) -> list[int]:
    """faiss's thread setting during each search of one query, then of a batch."""
    import faiss

    from qtsearch.index import faiss_backend

    seen: list[int] = []
    search = idx.backend.index.search

    def spy(q, k):
        seen.append(faiss.omp_get_max_threads())
        return search(q, k)

    monkeypatch.setattr(idx.backend.index, "search", spy)
    idx.search(QUERIES[0], 3, mode="semantic")
    batch = QUERIES * 6  # more than are searched one at a time
    assert len(batch) > max(faiss_backend.FEW_QUERIES, ALONE_UP_TO)
    idx.search(batch, 3, mode="semantic")
    return seen


def test_single_queries_search_on_one_faiss_thread(index, monkeypatch, tmp_path_factory,
                                                   shared_data, tiny_model):
    """faiss parallelises over queries: a single query to a graph or a small flat index runs
    on one thread (an idle thread's spin-wait only took a core); batches keep every thread,
    and so does one query to a flat index of PARALLEL_SCAN_ROWS or more, whose scan faiss
    splits over the threads; the setting is restored."""
    import faiss

    from qtsearch.index import faiss_backend

    own = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)  # the tests' own count is 1 (conftest): not telling
    try:
        with Searcher.open(small_index(tmp_path_factory, shared_data, tiny_model,
                                       "hnsw")) as hnsw:
            assert _faiss_threads_seen(hnsw, monkeypatch) == [1, 3]
        assert _faiss_threads_seen(index, monkeypatch) == [1, 3]  # flat
        monkeypatch.setattr(faiss_backend, "PARALLEL_SCAN_ROWS", index.count)
        assert _faiss_threads_seen(index, monkeypatch) == [3, 3]
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(own)


def test_a_bare_string_is_one_query(index):
    assert index.search(QUERIES[0], k=3) == index.search([QUERIES[0]], k=3)


def test_hit_to_dict_has_the_stable_json_shape(index):
    hit = index.search(QUERIES[:1], k=1)[0][0]
    d = hit.to_dict()
    assert list(d) == HIT_KEYS
    json.dumps(d)  # plain JSON types only
    assert d["id"] == hit.id and d["score"] == hit.score


def test_search_ids_leaves_each_sentence_out_of_its_own_list(index, corpus_vectors):
    _, vectors = corpus_vectors
    ids = [10, 1500]
    results = index.search_ids(ids, k=5)
    for i, hits in zip(ids, results, strict=True):
        assert len(hits) == 5 and i not in {h.id for h in hits}
        # the same ranking as exhaustive search over the other sentences
        others = vectors.copy()
        others[i] = 0.0  # score 0: never among the neighbours
        _check_against_exact(hits, others, vectors[i])
    with_self = index.search_ids([10], k=1, exclude_self=False)[0]
    assert with_self[0].score == pytest.approx(1.0, abs=1e-4)


def test_analogy_ranks_by_normalised_offset(index, corpus_vectors):
    texts, vectors = corpus_vectors
    a, b, c = texts[100], texts[200], texts[1300]
    va, vb, vc = index.embed([a, b, c])
    query = (vc + vb - va) / np.linalg.norm(vc + vb - va)
    kept = index.analogy(a, b, c, k=8, exclude_inputs=False)
    _check_against_exact(kept, vectors, query)
    excluded = index.analogy(a, b, c, k=8)
    assert len(excluded) == 8
    assert not {h.text for h in excluded} & {a, b, c}
    wider = index.analogy(a, b, c, k=11, exclude_inputs=False)  # room for the three inputs
    assert [h.id for h in excluded] == [h.id for h in wider if h.text not in (a, b, c)][:8]


def test_analogy_with_a_equal_to_b_returns_c(index, corpus_vectors):
    texts, _ = corpus_vectors
    a, c = texts[40], texts[900]
    assert index.analogy(a, a, c, k=1, exclude_inputs=False)[0].text == c
    assert all(h.text not in (a, c) for h in index.analogy(a, a, c, k=5))


def test_analogy_input_exclusion_ignores_case_and_spacing(index, corpus_vectors):
    texts, _ = corpus_vectors
    c = texts[900]
    shouted = "  " + c.upper() + " "
    hits = index.analogy(texts[40], texts[40], shouted, k=5)
    assert c not in {h.text for h in hits}


def test_context_gives_the_passage_around_a_sentence(index):
    (record,) = index.get([500])
    passage = index.context(500, window=2)
    assert [r.position for r in passage] == list(range(record.position - 2, record.position + 3))
    assert all(r.doc == record.doc for r in passage)
    assert passage[2] == record
    # at the start of the second document the window is cut at the document boundary
    first_of_doc1 = next(r for r in index.get(range(995, 1005)) if r.doc == 1)
    start = index.context(first_of_doc1.id, window=3)
    assert start[0].id == first_of_doc1.id and all(r.doc == 1 for r in start)
    assert len(start) == 4


def test_k_larger_than_the_index_is_clamped_with_a_note(index, caplog):
    with caplog.at_level(logging.WARNING, logger="qtsearch"):
        hits = index.search(QUERIES[:1], k=index.count + 50)[0]
    # every stored text once: a text stored twice is shown once
    texts = {" ".join(r.text.casefold().split()) for r in index.get(range(index.count))}
    assert len(hits) == len(texts) and len(texts) > index.count - 50
    assert "larger than the index" in caplog.text


@pytest.mark.parametrize("bad", ["", "   ", "\n"])
def test_empty_queries_are_refused(index, bad):
    with pytest.raises(InputError, match="empty query"):
        index.search([bad], k=3)


def test_queries_of_unknown_words_only_are_refused(index):
    with pytest.raises(InputError, match="vocabulary"):
        index.search(["Qwxzv Blorptangle zzyzx"], k=3, mode="semantic")
    with pytest.raises(InputError, match="vocabulary"):
        index.analogy(QUERIES[0], "Qwxzv", QUERIES[1])


def test_bad_k_and_bad_ids_are_refused(index):
    with pytest.raises(UsageError, match="at least 1"):
        index.search(QUERIES[:1], k=0)
    with pytest.raises(InputError, match="no sentence with id"):
        index.search_ids([index.count], k=3)
    with pytest.raises(InputError, match="no sentence with id"):
        index.context(-1)


def test_a_missing_index_is_one_clear_error(tmp_path):
    with pytest.raises(UnusableIndex, match="no such index folder"):
        Searcher.open(tmp_path / "nope")
    with pytest.raises(UnusableIndex, match="not a qtsearch index"):
        Searcher.open(tmp_path)


def _copy_index(flat: Path, dest: Path, **model_changes) -> Path:
    shutil.copytree(flat, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["model"].update(model_changes)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def _other_model(tiny_model: Path, dest: Path) -> Path:
    """The tiny model with its weights perturbed: a different model, same architecture."""
    shutil.copytree(tiny_model, dest, ignore=shutil.ignore_patterns("checkpoint*"))
    weights = load_file(dest / "weights.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + np.float32(0.01)
    save_file(weights, dest / "weights.safetensors")
    return dest


def test_an_index_refuses_a_different_model(flat, tiny_model, tmp_path):
    other = _other_model(tiny_model, tmp_path / "other_model")
    with pytest.raises(ModelError, match="fingerprint"):
        Searcher.open(flat, model=other)
    moved = _copy_index(flat, tmp_path / "index", path=str(other))
    with pytest.raises(ModelError, match="fingerprint"):
        Searcher.open(moved)
    # an explicit model that is the right one is accepted, as an Encoder object too
    with Searcher.open(moved, model=load_encoder(tiny_model, device="cpu")) as idx:
        assert idx.count == 2000


def test_a_vanished_model_is_one_clear_error(flat, tmp_path):
    moved = _copy_index(flat, tmp_path / "index", path=str(tmp_path / "gone"))
    with pytest.raises(ModelError, match="is gone"):
        Searcher.open(moved)


def test_vectors_and_metadata_of_different_sizes_are_refused(flat, tmp_path):
    broken = shutil.copytree(flat, tmp_path / "index")
    with MetadataStore.open(broken / "meta.sqlite", readonly=False) as store:
        store.insert_many([(5000, "An extra row.", "x.txt", 1, 9, 0)])
    with pytest.raises(UnusableIndex, match="rebuild"):
        Searcher.open(broken)


@pytest.mark.parametrize("index_type", ["sq8", "hnsw"])
def test_every_index_type_answers_close_to_exact(index_type, tmp_path_factory, shared_data,
                                                  tiny_model, index, corpus_vectors):
    _, vectors = corpus_vectors
    folder = small_index(tmp_path_factory, shared_data, tiny_model, index_type)
    manifest = json.loads((folder / "manifest.json").read_text())
    with Searcher.open(folder) as approx:
        assert approx.index_type == index_type
        assert approx.params == manifest["index_params"]
        found = approx.search(QUERIES, k=10, mode="semantic")
    truth = [_exact(vectors, q, 10)[0] for q in index.embed(QUERIES)]
    recall = np.mean([len({h.id for h in hits} & set(t.tolist())) / 10
                      for hits, t in zip(found, truth, strict=True)])
    assert recall >= 0.8


def test_warm_up_reads_a_graph_index_through(tmp_path_factory, shared_data, tiny_model,
                                             monkeypatch):
    """HNSW: warm-up reads the metadata and the mapped index file once (into the page cache)."""
    import qtsearch.search.searcher as search

    folder = small_index(tmp_path_factory, shared_data, tiny_model, "hnsw")
    read: list[int] = []
    real = search.read_through
    monkeypatch.setattr(search, "read_through",
                        lambda path: read.append(path.stat().st_size) or real(path))
    with Searcher.open(folder) as idx:
        idx.warm_up(wait=True)
        assert read == [(folder / name).stat().st_size for name in ("meta.sqlite", "index.faiss")]
        assert idx.search(QUERIES[:1], k=3)[0]


def test_search_parameters_can_be_overridden(tmp_path_factory, shared_data, tiny_model):
    import faiss

    folder = small_index(tmp_path_factory, shared_data, tiny_model, "hnsw")
    with Searcher.open(folder, params={"efSearch": 77}) as idx:
        assert faiss.downcast_index(idx.backend.index).hnsw.efSearch == 77
        assert idx.params["efSearch"] == 77
        assert "efSearch=77" in idx.describe()
    with pytest.raises(UsageError, match="do not apply"):
        Searcher.open(folder, params={"nprobe": 4})


def test_import_qtsearch_does_not_load_faiss():
    code = ("import sys, qtsearch; assert 'faiss' not in sys.modules; "
            "from qtsearch import Index; assert Index.__name__ == 'Index'; "
            "assert 'faiss' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_nothing_outside_the_index_package_imports_faiss():
    """The backend seam: vectors are reached through qtsearch.index.backend only."""
    package = Path(__file__).resolve().parents[2] / "qtsearch"
    offenders = [str(p.relative_to(package)) for p in package.rglob("*.py")
                 if p.parent != package / "index" and re.search(
                     r"^\s*(import faiss|from faiss)", p.read_text(encoding="utf-8"), re.M)]
    assert offenders == []
