"""qtsearch.index.index_folder: input checksums, sizes, what `info` reports, and the working copy a
writer changes (removed when it fails, the index unchanged), on a real index folder."""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from conftest import GRID_SENTENCES

from qtsearch.core.disk import NO_SPACE
from qtsearch.core.errors import InputError, Interrupted, OutputError, UnusableIndex
from qtsearch.index.index_folder import (
    copy_failure,
    file_checksum,
    folder_bytes,
    index_info,
    working_copy,
)
from qtsearch.index.names import INDEX_FILE, MANIFEST, META_FILE


@pytest.fixture
def copy(shipped_index: Path, tmp_path: Path) -> Path:
    """A copy of the shared index that a test may change."""
    return Path(shutil.copytree(shipped_index, tmp_path / "idx"))


def test_file_checksum_is_path_size_and_sha256(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    data = b"Emma Woodhouse, handsome, clever, and rich.\n" * 50_000  # > one chunk
    path.write_bytes(data)
    assert file_checksum(path) == {"path": str(path), "bytes": len(data),
                                   "sha256": hashlib.sha256(data).hexdigest()}


def test_an_unreadable_input_is_the_input_s_fault(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"missing\.txt: cannot be read \(No such file"):
        file_checksum(tmp_path / "missing.txt")
    with pytest.raises(InputError, match="cannot be read"):
        file_checksum(tmp_path)  # a folder


def test_folder_bytes_counts_every_file_below(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_bytes(b"12345")
    (tmp_path / "y").write_bytes(b"123")
    assert folder_bytes(tmp_path) == 8


def test_index_info_is_the_manifest_with_where_and_how_big(shipped_index: Path) -> None:
    manifest = json.loads((shipped_index / MANIFEST).read_text(encoding="utf-8"))
    info = index_info(shipped_index)
    assert info["kind"] == "index" and info["path"] == str(shipped_index)
    assert info["count"] == len(GRID_SENTENCES) == manifest["count"]
    assert info["index_type"] == "flat" and info["bm25"] is True and info["full_text"] is False
    assert info["bytes_on_disk"] == folder_bytes(shipped_index)
    assert info["bytes_on_disk"] > (shipped_index / INDEX_FILE).stat().st_size
    assert {k: info[k] for k in manifest if k != "transform"} == \
        {k: v for k, v in manifest.items() if k != "transform"}


def test_index_info_refuses_a_manifest_that_miscounts_the_rows(copy: Path) -> None:
    manifest = json.loads((copy / MANIFEST).read_text(encoding="utf-8"))
    manifest["count"] += 5
    (copy / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(UnusableIndex) as e:
        index_info(copy)
    assert str(e.value) == (f"{copy}: the manifest counts {len(GRID_SENTENCES) + 5:,} sentences "
                            f"but the metadata holds {len(GRID_SENTENCES):,} rows; rebuild "
                            "the index")


def test_the_working_copy_is_a_full_copy_beside_the_index(copy: Path) -> None:
    with working_copy(copy) as work:
        assert work == copy.with_name("idx.adding")
        assert sorted(p.name for p in work.iterdir()) == sorted(p.name for p in copy.iterdir())
        assert (work / META_FILE).read_bytes() == (copy / META_FILE).read_bytes()
    assert work.is_dir()  # kept after a block that succeeds: the writer swaps it in


def test_a_failed_block_removes_the_copy_and_leaves_the_index(copy: Path) -> None:
    before = folder_bytes(copy)
    stale = copy.with_name("idx.adding")
    stale.mkdir()  # a killed writer's left-over
    (stale / "junk").write_text("x")
    with pytest.raises(ValueError, match="writer failed"), working_copy(copy) as work:
        assert not (work / "junk").exists()  # the left-over is gone first
        (work / META_FILE).write_bytes(b"half written")
        raise ValueError("writer failed")
    assert not work.exists() and folder_bytes(copy) == before


def test_ctrl_c_in_the_block_says_the_index_is_unchanged(copy: Path) -> None:
    with pytest.raises(Interrupted) as e, working_copy(copy) as work:
        raise KeyboardInterrupt
    assert str(e.value) == f"interrupted; {copy} is unchanged"
    assert not work.exists()


def test_why_the_copy_failed_in_one_line(tmp_path: Path) -> None:
    work = tmp_path / "idx.adding"
    full = copy_failure(work, OSError(errno.ENOSPC, "No space left on device"))
    assert isinstance(full, OutputError)
    assert str(full) == (f"{work}: cannot make the working copy of the index ({NO_SPACE}); "
                         "the index is unchanged")
    failed = shutil.Error([("src/a", "dst/a", "[Errno 5] Input/output error")])
    assert str(copy_failure(work, failed)) == (
        f"{work}: cannot make the working copy of the index ([Errno 5] Input/output error); "
        "the index is unchanged")
    listed_full = shutil.Error([("src/a", "dst/a", "[Errno 28] No space left on device")])
    assert f"({NO_SPACE})" in str(copy_failure(work, listed_full))
