"""Index folders built and read without opening them (lifecycle.writers, on_disk, querying),
and what `Index` gives the benchmarks of vectors and index types (encoder, embed, backend)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import qtsearch
from qtsearch.core.errors import QTSearchError, UsageError
from qtsearch.lifecycle.on_disk import Manifest, build_seconds, folder_bytes
from qtsearch.lifecycle.querying import query_encoder
from qtsearch.lifecycle.writers import build_folder

TEXTS = ["The cat slept by the warm fire.", "A farmer walked to the market in the rain.",
         "My sister read a long letter from home.", "The doctor mended the broken fence."]


def test_a_folder_built_unopened_opens_with_a_shared_encoder(tmp_path: Path) -> None:
    result = build_folder(TEXTS, tmp_path / "idx", index="flat")
    manifest = Manifest.read(tmp_path / "idx")
    assert manifest.count == result.manifest["count"] == len(TEXTS)
    assert build_seconds(manifest.to_dict()) > 0 and folder_bytes(tmp_path / "idx") > 0
    encoder = query_encoder()
    with qtsearch.Index.open(tmp_path / "idx", model=encoder) as index:
        assert index.encoder.fingerprint == encoder.fingerprint  # its corpus words added
        assert index.search("a wet walk to the market", k=1)[0].text == TEXTS[1]


def test_a_folder_without_an_index_is_refused_and_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(QTSearchError):
        Manifest.read(tmp_path / "none")
    with pytest.raises(UsageError, match="unknown option bogus"):
        build_folder(TEXTS, tmp_path / "idx", bogus=1)


def test_embed_and_backend_rank_as_a_semantic_search(shipped_index: Path) -> None:
    with qtsearch.Index.open(shipped_index) as index:
        query = "a ship leaving the harbour"
        vectors = index.embed([query])
        assert vectors.shape == (1, index.backend.d)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
        _, ids = index.backend.search(vectors, 3)
        # the vector search alone: without word alignment's second look at the first hits
        cosine_only = dataclasses.replace(index.settings, alignment=0.0)
        assert list(ids[0]) == [h.id for h in index.search(query, k=3, mode="semantic",
                                                            settings=cosine_only)]
