"""Safetensors files read as mapped, read-only views (qtsearch.core.config.mapped_tensors):
the values the safetensors library reads, nothing copied, and a damaged file refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qtsearch.core.config import mapped_tensors, save_tensors

TENSORS = {
    "table": np.arange(24, dtype=np.float16).reshape(4, 6) / 7,
    "scales": np.linspace(-1, 1, 5, dtype=np.float32),
    "codes": np.array([[-128, 0, 127]], dtype=np.int8),
    "ids": np.array([3, 1, 2], dtype=np.int32),
    "offsets": np.array([0, 5, 1 << 40], dtype=np.int64),
    "blob": np.frombuffer("naïve".encode(), dtype=np.uint8),
}


@pytest.mark.parametrize("whole", [False, True])
def test_the_views_hold_what_the_library_reads_and_cannot_be_written(tmp_path: Path,
                                                                     whole: bool) -> None:
    path = tmp_path / "t.safetensors"
    save_tensors(TENSORS, path, {"format": "test", "note": "ünïcode"})
    meta, tensors = mapped_tensors(path, whole=whole)
    assert meta == {"format": "test", "note": "ünïcode"}
    library = load_file(str(path))
    assert set(tensors) == set(library) == set(TENSORS)
    for name, view in tensors.items():
        assert view.dtype == library[name].dtype and np.array_equal(view, library[name])
        assert not view.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            view.reshape(-1)[0] = 1


def test_a_damaged_file_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "t.safetensors"
    save_tensors(TENSORS, path)
    data = path.read_bytes()
    (tmp_path / "short").write_bytes(data[: len(data) - 3])  # the last tensor's bytes cut
    with pytest.raises(ValueError, match="does not fit its bytes"):
        mapped_tensors(tmp_path / "short")
    (tmp_path / "pickle").write_bytes(b"\x80\x04\x95" + b"\x00" * 40)  # no JSON header
    with pytest.raises(ValueError):
        mapped_tensors(tmp_path / "pickle")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ValueError):
        mapped_tensors(tmp_path / "empty")
    size = int.from_bytes(data[:8], "little")
    header = data[8 : 8 + size].replace(b'"F16"', b'"BF16"')  # a dtype numpy lacks
    (tmp_path / "bf16").write_bytes(data[:8] + header + data[8 + size :])
    with pytest.raises(ValueError, match="dtype 'BF16' is not supported"):
        mapped_tensors(tmp_path / "bf16")
    for name, text, says in (
            ("entry", b'{"t": 3}', "tensor t: a malformed entry"),
            ("offsets", b'{"t": {"dtype": "U8", "shape": [1]}}', "tensor t: a malformed entry"),
            ("meta", b'{"__metadata__": {"format": 2}}', "not a map of strings")):
        (tmp_path / name).write_bytes(len(text).to_bytes(8, "little") + text)
        with pytest.raises(ValueError, match=says):
            mapped_tensors(tmp_path / name)
