"""Identical vectors share one node of an HNSW graph (qtsearch.index.fold), on real text with
the shipped model (a mean of words: the same words give bit-identical vectors): the build
folds them, searches expand a node to all its rows, `add` folds copies of held vectors,
filters and scores equal brute force over the flat index of the same corpus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from query_fixtures import corpus_file

from qtsearch import load_encoder
from qtsearch.index import read_manifest
from qtsearch.index.faiss_backend import FaissBackend
from qtsearch.index.fold import FOLD_FILE, Fold, Folder
from qtsearch.index.recall import exact_neighbours, recall_at_k
from qtsearch.index.store import MetadataStore
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher

#: Real sentences of the corpus, repeated in a third document (sentences a mean-of-words model
#: or any model maps to one vector: the same text).
REPEATED = ["I do not know.", "Very well.", "It is very true."]
COPIES = 7


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fold")
    text = corpus_file(shared_data, folder).read_text(encoding="utf-8")
    extra = "\n".join(s for _ in range(COPIES) for s in REPEATED)
    path = folder / "repeated.txt"
    path.write_text(text + "\n\n" + extra + "\n", encoding="utf-8")
    return path


def _fold(folder: Path) -> Fold | None:
    return FaissBackend.open(folder / "index.faiss").fold


def _build(corpus: Path, out: Path, index: str) -> Path:
    build_index(IndexConfig(corpus=[str(corpus)], model=None, out=str(out), index=index,
                            device="cpu", shard_size=700))
    return out


@pytest.fixture(scope="module")
def pair(corpus: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fold_pair")
    return _build(corpus, root / "hnsw", "hnsw"), _build(corpus, root / "flat", "flat")


def test_copies_share_a_node_and_every_copy_is_found(pair):
    hnsw, flat = pair
    fold = _fold(hnsw)
    m = read_manifest(hnsw)
    with MetadataStore.open(hnsw / "meta.sqlite") as store:
        rows = store.count()
    assert fold is not None and fold.rows == rows == m["count"]
    assert m["build"]["graph_nodes"] == fold.nodes <= rows - len(REPEATED) * (COPIES - 1)
    assert not (flat / FOLD_FILE).exists()  # only graphs fold
    with Searcher.open(hnsw) as idx:
        assert idx.count == rows
        for sentence in REPEATED:
            # vectors, not search: search shows a text once
            hits = idx.search_vectors(idx.embed([sentence]), COPIES + 5)[0]
            same = [h for h in hits if h.text == sentence]
            assert len(same) >= COPIES  # the third document's copies (and any in the books)
            assert len({round(h.score, 6) for h in same}) == 1
            assert [h.id for h in hits[:len(same)]] == sorted(h.id for h in same)


def test_search_equals_brute_force(pair):
    """Top-10 scores per query equal the flat index's; recall counts any copy of a tied
    vector (the fold's nodes); filtered searches equal brute force exactly."""
    hnsw, flat = pair
    with Searcher.open(hnsw) as h, Searcher.open(flat) as f:
        x = f.backend.reconstruct(np.arange(f.count))
        queries = x[np.random.default_rng(3).choice(len(x), 200, replace=False)]
        truth = exact_neighbours(queries, iter([x]), 10)
        got_s, got_i = h.backend.search(queries, 10)
        assert recall_at_k(got_i, truth, h.backend.fold) >= 0.95
        np.testing.assert_allclose(got_s[:, 0], truth.scores[:, 0], atol=1e-5)
        for doc in (0, 2):  # a book, and the document of copies
            want = f.search_vectors(queries[:20], 5, where={"doc": doc})
            got = h.search_vectors(queries[:20], 5, where={"doc": doc})
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose([x.score for x in a], [x.score for x in b], atol=1e-5)
                assert all(hit.doc == doc for hit in a)


def test_add_folds_copies_of_held_vectors(pair, tmp_path):
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(pair[0], folder)
    before = _fold(folder)
    assert before is not None
    more = tmp_path / "more.txt"
    more.write_text(f"{REPEATED[0]}\nA sentence never seen before in this corpus, about "
                    f"rivers.\nA sentence never seen before in this corpus, about rivers.\n",
                    encoding="utf-8")
    add_to_index(folder, [str(more)], split_sentences=False)
    after = _fold(folder)
    assert after is not None
    assert after.rows == before.rows + 3 and after.nodes == before.nodes + 1
    np.testing.assert_array_equal(after.node_of_row[:before.rows], before.node_of_row)
    first = int(np.flatnonzero(before.node_of_row == after.node_of_row[before.rows])[0])
    with MetadataStore.open(folder / "meta.sqlite") as store:
        assert store.count() == after.rows == FaissBackend.open(folder / "index.faiss").ntotal
        assert store.get([first])[first]["text"] == REPEATED[0]
    with Searcher.open(folder) as idx:
        hits = idx.search_vectors(idx.embed(
            ["A sentence never seen before in this corpus, about rivers."]), 2)[0]
        assert sorted(h.id for h in hits) == [before.rows + 1, before.rows + 2]


def test_a_key_collision_gets_its_own_node(monkeypatch):
    """Different vectors that share a 64-bit key stay apart (the later one costs a node of
    its own each time: a collision wastes a node, never merges two vectors); real copies of
    the key's vector still fold."""
    import qtsearch.index.fold as fold_module

    monkeypatch.setattr(fold_module, "vector_keys",
                        lambda x, offset=0.0: np.zeros(len(x), np.uint64))
    held: list[np.ndarray] = []

    def stored(nodes: np.ndarray) -> np.ndarray:
        return np.concatenate(held)[nodes]

    folder = Folder(stored)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 8)).astype(np.float32)
    new = folder.assign(np.stack([a, b, a]))
    held.append(np.stack([a, b, a])[new])
    assert new.tolist() == [0, 1]
    new2 = folder.assign(np.stack([b, a]))
    assert new2.tolist() == [0]
    assert folder.fold().node_of_row.tolist() == [0, 1, 0, 2, 0]


def _unrecord(folder: Path) -> None:
    """Drop the manifest's record of file sizes and checksums, as indexes before it had."""
    import json

    manifest = json.loads((folder / "manifest.json").read_text())
    manifest.pop("files", None)
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_graph_without_a_fold_opens_and_adds_one_node_per_sentence(shared_data, tmp_path):
    """An HNSW index written before folding existed (no fold.safetensors: one node per
    sentence) opens, searches, and takes `add` as it always did, copies included."""
    corpus = tmp_path / "distinct.txt"
    lines = list(dict.fromkeys(corpus_file(shared_data, tmp_path).read_text(
        encoding="utf-8").splitlines()))
    # distinct texts may still share a direction ("Oh no!" and "Oh!": a negation with nothing
    # in its scope adds nothing), so keep one line per distinct unit vector
    vectors = np.round(load_encoder(device="cpu").encode(lines, normalize=True), 4)
    distinct = {v.tobytes(): line for v, line in zip(vectors, lines, strict=True)}
    corpus.write_text("\n".join(dict.fromkeys(distinct.values())), encoding="utf-8")
    folder = _build(corpus, tmp_path / "old", "hnsw")
    fold = _fold(folder)
    assert fold is not None and fold.nodes == fold.rows  # no copies: nothing was folded
    (folder / FOLD_FILE).unlink()
    _unrecord(folder)  # an index from before folding had no record of file checksums either
    with Searcher.open(folder) as idx:
        rows = idx.count
        assert idx.backend.fold is None
        top = idx.search(REPEATED[1], k=1, mode="semantic")[0][0]
    more = tmp_path / "more.txt"
    more.write_text(f"{top.text}\n{top.text}\n", encoding="utf-8")
    add_to_index(folder, [str(more)], split_sentences=False)
    assert not (folder / FOLD_FILE).exists()
    backend = FaissBackend.open(folder / "index.faiss")
    assert backend.ntotal == int(backend.index.ntotal) == rows + 2
    with Searcher.open(folder) as idx:  # vectors, not search: search shows a text once
        found = {h.id for h in idx.search_vectors(idx.embed([top.text]), 3)[0]}
    assert found == {top.id, rows, rows + 1}  # the sentence and its two copies


def test_a_damaged_or_foreign_fold_is_one_clear_error(pair, tmp_path):
    import shutil

    from qtsearch.core.errors import UnusableIndex

    folder = tmp_path / "idx"
    shutil.copytree(pair[0], folder)
    (folder / FOLD_FILE).write_bytes(b"not a safetensors file")
    with pytest.raises(UnusableIndex, match=r"fold\.safetensors: 22 bytes where the manifest "
                                          r"records"):
        Searcher.open(folder)  # the size check of every open (qtsearch.index.integrity)
    _unrecord(folder)  # without the record, the fold's own reader says what is wrong
    with pytest.raises(UnusableIndex, match="corrupt or unreadable fold"):
        Searcher.open(folder)
    Fold(np.zeros(10, np.int64)).save(folder)  # another index's fold: 1 node, not thousands
    with pytest.raises(UnusableIndex, match="does not match the index"):
        Searcher.open(folder)
