"""The build pipeline embeds with any encoder that only has `encode()` (here mean GloVe, by its
name): the index holds that encoder's vectors (through the fitted transform), the manifest names
it so `add` and `Searcher.open` reload it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import wikitext_slice

from qtsearch.encoders.baselines import GloveBow
from qtsearch.index import open_faiss_index, read_manifest
from qtsearch.index.store import MetadataStore
from qtsearch.index.transform import VectorTransform
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher


@pytest.fixture(scope="module")
def glove_index(shared_data, tmp_path_factory):
    corpus = wikitext_slice(shared_data, tmp_path_factory, 60_000)
    out = tmp_path_factory.mktemp("glove") / "wiki"
    return build_index(IndexConfig(corpus=[str(corpus)], model="glove", out=str(out),
                                   index="flat", split_sentences=True, shard_size=200,
                                   fit="abtt:2"))


def test_generic_encoder_vectors_are_in_the_index(glove_index):
    folder = glove_index.path
    m = read_manifest(folder)
    assert m["model"]["path"] == "glove" and m["model_dim"] == 50 and m["dim"] == 50
    with MetadataStore.open(folder / "meta.sqlite") as store:
        rows = store.get(range(m["count"]))
    texts = [rows[i]["text"] for i in sorted(rows)]
    expected = VectorTransform.load(folder).apply(GloveBow().encode(texts, normalize=True))
    index = open_faiss_index(folder / "index.faiss")
    np.testing.assert_allclose(index.reconstruct_n(0, index.ntotal), expected, atol=1e-5)


def test_generic_encoder_add_and_open(glove_index, tmp_path):
    import shutil

    folder = tmp_path / "wiki"
    shutil.copytree(glove_index.path, folder)
    more = tmp_path / "more.txt"
    more.write_text("The lobster population of the northern coast declined sharply.\n",
                    encoding="utf-8")
    result = add_to_index(folder, [str(more)])
    assert result.added == 1
    with Searcher.open(folder, device="cpu") as index:
        hits = index.search(["The lobster population of the northern coast declined sharply."],
                            k=1, mode="semantic")[0]
        assert hits[0].id == result.count - 1
