"""qtsearch.search.opening: the index's own model (another one refused by its fingerprint),
the chain of dimensions model → transform → vector index, and reading files through."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import ModelError, UnusableIndex
from qtsearch.index.manifest import Manifest, read_manifest
from qtsearch.index.transform import VectorTransform
from qtsearch.search.opening import check_dims, model_for, read_through
from qtsearch.search.searcher import Searcher


def typed(manifest: dict) -> Manifest:
    """The manifest as readers take it (the tests vary its dict)."""
    return Manifest.from_dict(manifest)


@pytest.fixture(scope="module")
def searcher(shipped_index: Path) -> Iterator[Searcher]:
    with Searcher.open(shipped_index) as opened:
        yield opened


def test_the_manifest_names_the_model_it_opens(shipped_index: Path, searcher: Searcher) -> None:
    manifest = read_manifest(shipped_index)
    encoder = model_for(shipped_index, typed(manifest), None, "cpu", "fp32")
    assert encoder.fingerprint == manifest["model"]["fingerprint"]
    assert encoder.dim == searcher.encoder.dim
    # the same model passed by object is taken as it is
    assert model_for(shipped_index, typed(manifest), encoder, "cpu", "fp32").fingerprint == \
        encoder.fingerprint


def test_a_model_of_another_fingerprint_is_refused(shipped_index: Path,
                                                   searcher: Searcher) -> None:
    manifest = read_manifest(shipped_index)
    other = {**manifest, "model": {**manifest["model"], "name": "older",
                                   "fingerprint": "0123456789abcdef"}}
    with pytest.raises(ModelError) as e:
        model_for(shipped_index, typed(other), searcher.encoder, "cpu", "fp32")
    message = str(e.value)
    assert "was built with model older (fingerprint 0123456789abcdef)" in message
    assert f"has fingerprint {searcher.encoder.fingerprint}" in message
    assert "use the same model or rebuild the index" in message


def test_a_manifest_without_a_model_or_with_a_gone_one(shipped_index: Path) -> None:
    manifest = read_manifest(shipped_index)
    with pytest.raises(UnusableIndex, match="the manifest names no model; pass a model"):
        model_for(shipped_index, typed({**manifest, "model": {}}), None, "cpu", "fp32")
    gone = {**manifest, "model": {**manifest["model"], "path": "/nowhere/model"}}
    with pytest.raises(ModelError, match=r"the model this index was built with is gone "
                                         r"\(/nowhere/model\)"):
        model_for(shipped_index, typed(gone), None, "cpu", "fp32")


def test_dimensions_that_chain_pass(shipped_index: Path, searcher: Searcher) -> None:
    manifest = read_manifest(shipped_index)
    check_dims(shipped_index, typed(manifest), searcher.encoder, searcher.backend,
               searcher.transform)


def test_a_dimension_mismatch_names_every_dimension(shipped_index: Path,
                                                    searcher: Searcher) -> None:
    manifest = read_manifest(shipped_index)
    d, model = searcher.backend.d, searcher.encoder.dim
    with pytest.raises(UnusableIndex) as e:
        check_dims(shipped_index, typed({**manifest, "dim": d + 1}), searcher.encoder,
                   searcher.backend, None)
    assert str(e.value) == (f"{shipped_index}: dimension mismatch (manifest {d + 1}, vector "
                            f"index {d}, model {model}); rebuild the index")


def test_a_transform_must_chain_model_to_index(shipped_index: Path,
                                               searcher: Searcher) -> None:
    manifest = read_manifest(shipped_index)
    d, model = searcher.backend.d, searcher.encoder.dim
    # a whitening fitted on vectors of another model: in_dim is not the model's
    wrong = VectorTransform("whiten", np.zeros(model + 2, np.float32),
                            np.zeros((model + 2, d), np.float32), fitted_on=10)
    with pytest.raises(UnusableIndex, match=rf"model {model}, transform {model + 2}->{d}\)"):
        check_dims(shipped_index, typed(manifest), searcher.encoder, searcher.backend, wrong)
    # one that reduces to a dimension other than the index's
    short = VectorTransform("whiten", np.zeros(model, np.float32),
                            np.zeros((model, d - 1), np.float32), fitted_on=10)
    with pytest.raises(UnusableIndex, match=rf"transform {model}->{d - 1}\)"):
        check_dims(shipped_index, typed(manifest), searcher.encoder, searcher.backend, short)
    fine = VectorTransform("whiten", np.zeros(model, np.float32),
                           np.zeros((model, d), np.float32), fitted_on=10)
    check_dims(shipped_index, typed(manifest), searcher.encoder, searcher.backend, fine)


def test_read_through_reads_a_file_and_ignores_a_missing_one(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(b"x" * 1000)
    read_through(path, chunk=64)  # in many chunks, to its end
    read_through(tmp_path / "missing")  # an OSError is swallowed: warming is best effort
    assert path.read_bytes() == b"x" * 1000
