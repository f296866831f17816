"""The build pipeline on real text (WikiText-2) with a real tiny model and real faiss indexes."""

from __future__ import annotations

import sqlite3

import faiss
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import wikitext_slice

from qtsearch.core.errors import InputError, ModelError, OutputError
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import apply_search_params, gpu_available, open_faiss_index, read_manifest
from qtsearch.index.choose import FLAT_MAX, SQ8_MAX, choose_index, ivf_lists
from qtsearch.index.faiss_backend import FaissBackend
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import VectorTransform
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.pipeline import IndexConfig, build_index, default_out

#: ~3,700 sentences of WikiText-2 validation articles, split from running text.
CORPUS_BYTES = 500_000


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    return wikitext_slice(shared_data, tmp_path_factory, CORPUS_BYTES)


@pytest.fixture(scope="module")
def flat_index(corpus, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("flat") / "wiki"
    result = build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model), out=str(out),
                                     index="flat", split_sentences=True, parquet=True,
                                     shard_size=1000))
    result.files = sorted(p.name for p in result.path.iterdir())  # before any reader opens it
    return result


def _vectors(index_dir):
    index = open_faiss_index(index_dir / "index.faiss")
    return index.reconstruct_n(0, index.ntotal)


def test_manifest_and_counts(flat_index, corpus, tiny_model):
    m = read_manifest(flat_index.path)
    assert m["format"] == "qtsearch-index" and m["version"] == 1
    assert m["index_type"] == "flat" and m["index_key"] == "Flat" and m["metric"] == "cosine"
    assert m["model"]["fingerprint"] == load_encoder(tiny_model).fingerprint
    assert m["dim"] == m["model"]["dim"] == 128
    assert m["corpus"][0]["path"] == str(corpus) and len(m["corpus"][0]["sha256"]) == 64
    assert set(m["stages"]) == {"read", "embed", "index", "metadata"}
    assert m["count"] > 3000
    index = open_faiss_index(flat_index.path / "index.faiss")
    with MetadataStore.open(flat_index.path / "meta.sqlite") as store:
        assert store.count() == index.ntotal == m["count"]
    # nothing of the build is left behind
    assert flat_index.files == [
        "bm25", "config.json", "index.faiss", "manifest.json", "meta.parquet", "meta.sqlite",
        "transform.json", "transform.safetensors"]
    assert not flat_index.path.with_name("wiki.partial").exists()


def test_rows_keep_their_origin(flat_index, corpus):
    with MetadataStore.open(flat_index.path / "meta.sqlite") as store:
        rows = store.get(range(store.count()))
    lines = corpus.read_text(encoding="utf-8").split("\n")
    ids = sorted(rows)
    assert ids == list(range(len(ids)))
    for i in ids[:: max(1, len(ids) // 200)]:
        r = rows[i]
        assert r["source"] == str(corpus)
        # running text: the sentence starts on its line (the line holds its first words)
        assert r["text"].split()[0] in lines[r["line"] - 1]
    # positions count up within a document (one file = one document here)
    assert [rows[i]["position"] for i in ids] == list(range(len(ids)))
    assert {rows[i]["doc"] for i in ids} == {0}


def test_vectors_normalised_and_self_nearest(flat_index, tiny_model):
    x = _vectors(flat_index.path)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-4)
    index = open_faiss_index(flat_index.path / "index.faiss")
    _, found = index.search(x, 1)
    encoder = load_encoder(tiny_model)
    with MetadataStore.open(flat_index.path / "meta.sqlite") as store:
        rows = store.get(range(len(x)))
    misses = [i for i in range(len(x)) if found[i, 0] != i]
    for i in misses:  # only exact duplicates (as the model reads them) may come first
        j = int(found[i, 0])
        assert encoder.token_ids(rows[i]["text"]) == encoder.token_ids(rows[j]["text"])
    assert len(misses) < len(x) // 2  # the rest are all exact duplicates


def test_parquet_equals_sqlite(flat_index):
    table = pq.read_table(flat_index.path / "meta.parquet")
    conn = sqlite3.connect(flat_index.path / "meta.sqlite")
    rows = conn.execute("SELECT * FROM sentences ORDER BY id").fetchall()
    conn.close()
    assert [tuple(r.values()) for r in table.to_pylist()] == rows


@pytest.mark.parametrize("kind", ["sq8", "ivf", "ivf-pq", "hnsw"])
def test_approximate_recall_against_flat(kind, flat_index, corpus, tiny_model, tmp_path):
    result = build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model),
                                     out=str(tmp_path / kind), index=kind,
                                     split_sentences=True, shard_size=1000))
    m = result.manifest
    assert m["index_type"] == kind
    x = _vectors(flat_index.path)
    queries = x[np.random.default_rng(7).choice(len(x), 300, replace=False)]
    _, truth = open_faiss_index(flat_index.path / "index.faiss").search(queries, 10)
    index = FaissBackend.open(result.path / "index.faiss")  # rows, also of a folded graph
    index.set_params(m["index_params"])
    _, found = index.search(queries, 10)
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.9, (kind, m["index_key"], m["index_params"], recall)
    assert m["build"]["recall"]["recall@10"] >= 0.9
    with MetadataStore.open(result.path / "meta.sqlite") as store:
        assert store.count() == index.ntotal


def test_recall_counts_a_tie_with_the_kth_neighbour_as_found(flat_index):
    """A sentence repeated 25 times: which 10 of its copies are the exact top 10 is arbitrary,
    so returning 10 other copies is recall 1 (by id it would be 0, and the build's tuning
    chased a recall that ties alone kept out of reach); a worse neighbour is still a miss."""
    from qtsearch.index.recall import exact_neighbours, recall_at_k

    x = _vectors(flat_index.path)[:500]
    x = np.concatenate([x, np.repeat(x[:1], 24, axis=0)])  # ids 0, 500..523: one vector
    truth = exact_neighbours(x[:1], iter([x[:250], x[250:]]), 10)
    copies = {0, *range(500, 524)}
    assert set(truth.ids[0, :10].tolist()) <= copies
    others = np.array([sorted(copies - set(truth.ids[0, :10].tolist()))[:10]])
    assert recall_at_k(others, truth) == 1.0
    assert recall_at_k(others, truth.ids[:, :10]) == 0.0  # plain ids: the old measure
    worse = others.copy()
    worse[0, -1] = int(np.argsort(-(x[1:500] @ x[0]))[0]) + 1  # the best non-copy
    assert recall_at_k(worse, truth) == 0.9


def test_exact_neighbours_are_a_full_sort_s_with_ties_in_row_order(monkeypatch):
    """The partial sorts keep only scores at least a query's (k + TIE_EXTRA)-th best so far:
    the same ids and scores as sorting every score, best first and, of equal scores, the
    earlier row first; whatever the batches and chunks (a first batch smaller than k +
    TIE_EXTRA, a chunk cut mid-batch), with copies of rows tied across chunk boundaries."""
    from qtsearch.index import recall
    from qtsearch.index.recall import TIE_EXTRA, exact_neighbours

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3000, 16)).astype(np.float32)
    x[1500:1560] = x[7]  # 61 copies of one row: more than k + TIE_EXTRA tie
    x[2990:] = x[100]
    queries = np.concatenate([x[[7, 100, 5, 2999]], rng.standard_normal((5, 16))]).astype(
        np.float32)
    monkeypatch.setattr(recall, "EXACT_CHUNK", 700)
    monkeypatch.setattr(recall, "SEED_COLUMNS", 64)
    k = 10
    kk = k + TIE_EXTRA
    scores = queries @ x.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :kk]
    for cuts in ([20, 1000, 2500], [1500], [999, 1001]):
        truth = exact_neighbours(queries, iter(np.split(x, cuts)), k)
        assert np.array_equal(truth.ids, order)
        assert np.array_equal(truth.scores, np.take_along_axis(scores, order, axis=1))
    few = exact_neighbours(queries[:2], iter([x[:12]]), k)  # fewer rows than k + TIE_EXTRA
    assert np.array_equal(few.ids[:, :12], np.argsort(-scores[:2, :12], axis=1,
                                                      kind="stable"))
    assert (few.ids[:, 12:] == -1).all() and np.isneginf(few.scores[:, 12:]).all()


def test_add_appends(flat_index, shared_data, tiny_model, tmp_path):
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(flat_index.path, folder)
    before = read_manifest(folder)["count"]
    more = tmp_path / "more.txt"
    more.write_text("A new sentence about rivers.\nAnother one follows.\n\n"
                    "Second document here.\n", encoding="utf-8")
    result = add_to_index(folder, [str(more)], split_sentences=False)
    assert result.added == 3 and result.count == before + 3
    m = read_manifest(folder)
    assert m["count"] == before + 3 and m["corpus"][-1]["path"] == str(more)
    index = open_faiss_index(folder / "index.faiss")
    with MetadataStore.open(folder / "meta.sqlite") as store:
        assert store.count() == index.ntotal == before + 3
        rows = store.get([before, before + 1, before + 2])
    assert [r["doc"] for r in rows.values()] == [1, 1, 2]  # after the corpus' last document
    assert [r["position"] for r in rows.values()] == [0, 1, 0]
    vec = load_encoder(tiny_model).encode(["Second document here."], normalize=True)
    _, found = index.search(VectorTransform.load(folder).apply(vec), 1)  # the index's space
    assert found[0, 0] == before + 2
    # the Parquet copy follows
    assert pq.read_table(folder / "meta.parquet").num_rows == before + 3


def test_bad_inputs_lose_nothing(flat_index, corpus, tiny_model, tmp_path):
    before = sorted((p.name, p.stat().st_size) for p in flat_index.path.iterdir())
    cfg = dict(model=str(tiny_model), split_sentences=True)
    with pytest.raises(OutputError, match="already exists"):
        build_index(IndexConfig(corpus=[str(corpus)], out=str(flat_index.path), **cfg))
    assert sorted((p.name, p.stat().st_size) for p in flat_index.path.iterdir()) == before
    with pytest.raises(InputError, match="no such file"):
        build_index(IndexConfig(corpus=[str(tmp_path / "nope.txt")], out=str(tmp_path / "a"),
                                **cfg))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        build_index(IndexConfig(corpus=[str(empty)], out=str(tmp_path / "b"), **cfg))
    with pytest.raises(ModelError):
        build_index(IndexConfig(corpus=[str(corpus)], model=str(tmp_path / "no-model"),
                                out=str(tmp_path / "c")))
    assert not any((tmp_path / n).exists() for n in ("a", "b", "c", "a.partial", "c.partial"))
    # a folder that is not an index is never replaced, even with overwrite
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(OutputError, match="not a qtsearch index"):
        build_index(IndexConfig(corpus=[str(corpus)], out=str(precious), overwrite=True, **cfg))
    assert (precious / "notes.txt").read_text() == "keep me"


def test_overwrite_replaces_atomically(flat_index, corpus, tiny_model, tmp_path):
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(flat_index.path, folder)
    small = tmp_path / "small.txt"
    small.write_text("One line.\nTwo lines.\n", encoding="utf-8")
    result = build_index(IndexConfig(corpus=[str(small)], model=str(tiny_model),
                                     out=str(folder), overwrite=True))
    assert result.manifest["count"] == 2 and read_manifest(folder)["count"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx", "small.txt"]


def test_choice_rules():
    assert choose_index(10_000, 1200).index_type == "flat"
    assert choose_index(FLAT_MAX, 1200).index_type == "sq8"
    inverted = choose_index(1_000_000, 256, memory=8 << 30)  # scans within budget
    assert inverted.index_type == "ivf" and inverted.tune == "nprobe"
    graph = choose_index(SQ8_MAX * 4, 1200, memory=64 << 30)  # scans over budget: a graph
    assert graph.index_type == "hnsw" and graph.tune == "efSearch"
    big = choose_index(SQ8_MAX * 4, 1200, "ivf-pq")
    assert big.index_type == "ivf-pq" and big.key.startswith(f"IVF{ivf_lists(SQ8_MAX * 4)},")
    assert "Refine" in big.key and big.tune == "nprobe" and max(big.candidates) <= 2048
    tight = choose_index(SQ8_MAX * 4, 1200, memory=2 << 30)  # 1.4 GB of 8-bit codes: over
    assert "Refine" not in tight.key and "over the memory budget" in tight.why
    assert choose_index(100, 64, "hnsw").key == "HNSW32"
    assert ivf_lists(1_000_000) == 1024 and ivf_lists(1000) <= 1000 // 39
    for n in (500, 5000, 50_000):
        faiss.index_factory(128, choose_index(n, 128, "ivf-pq").key)  # a valid factory key


def test_default_out():
    assert str(default_out(["data/wiki.txt.gz"])) == "indexes/wiki"
    assert str(default_out(["/x/books/"])) == "indexes/books"


@pytest.mark.cuda
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_build_matches_cpu(flat_index, corpus, tiny_model, tmp_path):
    """Embedding and IVF training/assignment on the GPU; the saved index is a CPU index with
    the same recall as a CPU build."""
    result = build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model),
                                     out=str(tmp_path / "gpu"), index="ivf-pq", device="cuda",
                                     split_sentences=True, shard_size=1000))
    assert result.manifest["build"]["faiss_device"] == "cuda"
    index = open_faiss_index(result.path / "index.faiss")  # readable by CPU faiss
    assert index.ntotal == result.manifest["count"]
    x = _vectors(flat_index.path)
    queries = x[:300]
    _, truth = open_faiss_index(flat_index.path / "index.faiss").search(queries, 10)
    apply_search_params(index, result.manifest["index_params"])
    _, found = index.search(queries, 10)
    recall = np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)])
    assert recall >= 0.85  # GPU bf16 embeddings differ slightly from the CPU flat reference


def test_interrupted_rename_resumes_without_rework(corpus, tiny_model, tmp_path, monkeypatch):
    """A stop after the index is complete but before the rename: the rerun only renames."""
    import qtsearch.indexing.pipeline as indexer

    cfg = IndexConfig(corpus=[str(corpus)], model=str(tiny_model), out=str(tmp_path / "a"),
                      split_sentences=True, index="flat", shard_size=2000)

    def stop(new, out):
        raise KeyboardInterrupt

    monkeypatch.setattr(indexer, "swap_in", stop)
    with pytest.raises(KeyboardInterrupt):
        build_index(cfg)
    assert not (tmp_path / "a").exists() and (tmp_path / "a.partial" / "index.faiss").is_file()
    monkeypatch.undo()
    result = build_index(cfg)
    assert "everything" in result.resumed
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "bm25", "config.json", "index.faiss", "manifest.json", "meta.sqlite", "transform.json",
        "transform.safetensors"]
    assert not (tmp_path / "a.partial").exists()
