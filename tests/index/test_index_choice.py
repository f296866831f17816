"""The automatic index choice: deterministic for a size and a memory, and every type it can pick
answers as exact search does within its recall contract, on real sentences."""

from __future__ import annotations

import faiss
import numpy as np
import pytest
from conftest import wikitext_slice

from qtsearch.index import open_faiss_index, read_manifest
from qtsearch.index.choose import (
    FLAT_MAX,
    QUERY_BUDGET_MS,
    SQ8_MAX,
    TARGET_RECALL,
    choose_index,
    ivf_lists,
    ivf_query_ms,
)
from qtsearch.index.faiss_backend import BLAS_THRESHOLD, OLD_BLAS_THRESHOLD, FaissBackend
from qtsearch.index.recall import TIE_EXTRA, Truth, recall_at_k
from qtsearch.indexing.pipeline import IndexConfig, build_index

#: ~3,700 sentences of WikiText-2 validation articles.
CORPUS_BYTES = 500_000
GB = 1 << 30


def test_choice_is_deterministic_for_a_size_and_memory():
    for n in (1_000, FLAT_MAX, SQ8_MAX, 1_000_000, 3_000_000, 20_000_000):
        for dim in (256, 1200):
            for memory in (1 * GB, 8 * GB, 64 * GB):
                a, b = choose_index(n, dim, memory=memory), choose_index(n, dim, memory=memory)
                assert (a.index_type, a.key, a.why, a.candidates) == (
                    b.index_type, b.key, b.why, b.candidates)


def test_auto_picks_by_size_build_and_query_cost():
    assert choose_index(10_000, 256, memory=8 * GB).index_type == "flat"
    assert choose_index(FLAT_MAX, 256, memory=8 * GB).index_type == "sq8"
    # 1M of the shipped model's 256 dims: the inverted file's scan is within the query budget,
    # and it builds far faster than a graph
    million = choose_index(1_000_000, 256, memory=8 * GB)
    assert ivf_query_ms(1_000_000, 256) <= QUERY_BUDGET_MS
    assert million.index_type == "ivf" and million.tune == "nprobe"
    assert million.key == f"IVF{ivf_lists(1_000_000)},SQ8"
    assert million.fallback_key == f"IVF{ivf_lists(1_000_000)},Flat"
    assert "CPU-s" in million.why and "faster" in million.why
    # a scan over budget (more vectors, wider vectors) goes to the graph where it fits ...
    wide = choose_index(1_000_000, 1200, memory=64 * GB)
    assert ivf_query_ms(1_000_000, 1200) > QUERY_BUDGET_MS and wide.index_type == "hnsw"
    assert "over budget" in wide.why
    # ... and stays an inverted file where the graph does not
    tight = choose_index(1_000_000, 1200, memory=8 * GB)
    assert tight.index_type == "ivf" and "would not" in tight.why
    # neither fits: product quantization
    assert choose_index(1_000_000, 1200, memory=2 * GB).index_type == "ivf-pq"
    for n in (SQ8_MAX, 1_000_000, 4_000_000):
        c = choose_index(n, 256, memory=8 * GB)
        faiss.index_factory(256, c.key, faiss.METRIC_INNER_PRODUCT)  # a valid factory key
        if c.tune == "nprobe":
            assert c.candidates == sorted(c.candidates) and max(c.candidates) <= ivf_lists(n)
    assert choose_index(100, 64, "ivf").index_type == "ivf"


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    return wikitext_slice(shared_data, tmp_path_factory, CORPUS_BYTES)


@pytest.fixture(scope="module")
def flat(corpus, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("flat") / "wiki"
    return build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model), out=str(out),
                                   index="flat", split_sentences=True, shard_size=1000))


@pytest.mark.parametrize("kind", ["sq8", "ivf", "hnsw"])
def test_each_automatic_type_answers_as_exact_search(kind, flat, corpus, tiny_model,
                                                     tmp_path):
    """The types auto picks beyond flat, built on real sentences as auto builds them (the same
    key, training and tuning): recall@10 of corpus queries against exact search (ties with the
    10th counted as found, as the build counts them) reaches the contract the build records."""
    result = build_index(IndexConfig(corpus=[str(corpus)], model=str(tiny_model),
                                     out=str(tmp_path / kind), index=kind,
                                     split_sentences=True, shard_size=1000))
    m = result.manifest
    assert m["index_type"] == kind
    assert m["build"]["recall"]["recall@10"] >= TARGET_RECALL
    exact = open_faiss_index(flat.path / "index.faiss")
    x = exact.reconstruct_n(0, exact.ntotal)
    queries = x[np.random.default_rng(11).choice(len(x), 300, replace=False)]
    scores, ids = exact.search(queries, 10 + TIE_EXTRA)
    index = FaissBackend.open(result.path / "index.faiss")
    index.set_params(m["index_params"])
    _, found = index.search(queries, 10)
    # other queries than the build tuned on: a sampling margin below its target
    assert recall_at_k(found, Truth(ids, scores, 10), index.fold) >= TARGET_RECALL - 0.03


def test_a_lone_query_scans_without_blas_and_a_batch_with_it():
    """A newer faiss scans queries one by one below queries x dimensions = its threshold:
    one or two queries of the shipped model's 256 dimensions, not four (docs/speed.md)."""
    threshold = faiss.cvar.distance_compute_blas_threshold
    if threshold != OLD_BLAS_THRESHOLD:  # an older faiss counts queries: its default suits
        assert threshold == BLAS_THRESHOLD
        assert 2 * 256 < threshold <= 4 * 256


def test_flat_is_exact(flat):
    m = read_manifest(flat.path)
    assert m["index_type"] == "flat" and m["index_params"] == {}


def test_build_summary_shows_each_stage_share():
    from rich.console import Console

    from qtsearch.app.commands.index import summary_table
    from qtsearch.index.manifest import Manifest, compose_manifest

    manifest = Manifest.from_dict(compose_manifest(
        count=1_000_000, index_type="ivf", dim=256, index_key="IVF1024,SQ8", index_params={},
        metric="cosine", model={}, transform={"spec": "centre"}, build={"parallel_stages": True},
        stages={"read": 6.0, "embed": 18.0, "index": 20.0, "metadata": 10.0}))
    console = Console(width=120, record=True)
    console.print(summary_table(manifest, 1_000_000_000))
    cells = [[c.strip() for c in line.split("│") if c.strip()]
             for line in console.export_text().splitlines()]
    rows = {c[0]: c for c in cells if c and c[0] in ("read", "embed", "index", "metadata")}
    # total = read + embed + max(index, metadata) = 44 s
    assert rows["embed"][-1] == "41%" and rows["index"][-1] == "45%"
