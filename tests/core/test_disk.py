"""qtsearch.core.disk: a full disk recognised in every library's words, and a write that
meets one ending as one OutputError naming the file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from qtsearch.core.disk import (
    NO_SPACE,
    device_full,
    no_space,
    no_space_error,
    read_only_part,
    remove_tree,
    writing,
)
from qtsearch.core.errors import InputError, OutputError


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    OSError("[Errno 28] Error writing bytes to file"),  # pyarrow
    OSError("51200 requested and 3040 written"),  # numpy's short write
    RuntimeError("I/O error: No space left on device (os error 28)"),  # safetensors
    RuntimeError("Error in faiss: ... fwrite ... No space left on device"),
    Exception("database or disk is full"),  # sqlite3.OperationalError's words
])
def test_a_full_disk_in_any_library_s_words(error: BaseException) -> None:
    assert no_space(error)


@pytest.mark.parametrize("error", [
    OSError(errno.EACCES, "Permission denied"),
    OSError(errno.EIO, "Input/output error"),
    ValueError("28 items"),
    RuntimeError("requested and written"),
])
def test_other_errors_are_not_a_full_disk(error: BaseException) -> None:
    assert not no_space(error)


def test_the_full_disk_message() -> None:
    e = no_space_error("/data/idx/meta.sqlite", "errno 28")
    assert isinstance(e, OutputError) and e.code == 6
    assert str(e) == (f"/data/idx/meta.sqlite: {NO_SPACE} (errno 28); free some and run the "
                      "same command again")
    assert str(no_space_error(Path("x"))) == f"x: {NO_SPACE}; free some and run the same " \
                                              "command again"


def test_device_full_looks_at_the_nearest_existing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "a" / "b" / "c.txt"
    assert not device_full(missing)  # some space is left where the tests run
    assert device_full(missing, margin=1 << 62)  # but not 4 EiB


def test_writing_turns_a_full_disk_into_one_line_and_removes_the_temporary(
        tmp_path: Path) -> None:
    tmp = tmp_path / "out.tmp"
    tmp.write_text("half")
    with pytest.raises(OutputError) as e, writing(tmp_path / "out.bin", tmp):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert str(e.value).startswith(f"{tmp_path / 'out.bin'}: {NO_SPACE}")
    assert isinstance(e.value.__cause__, OSError)
    assert not tmp.exists()


def test_writing_names_a_file_refused_and_passes_other_errors(tmp_path: Path) -> None:
    refused = r"/ro/part\.npy: cannot write it \(permission denied\)"
    with pytest.raises(OutputError, match=refused), writing(tmp_path / "out.bin"):
        raise PermissionError(errno.EACCES, "Permission denied", "/ro/part.npy")
    with pytest.raises(ValueError, match="not a disk problem"), writing(tmp_path / "out.bin"):
        raise ValueError("not a disk problem")
    ours = InputError("bad input")
    with pytest.raises(InputError) as e, writing(tmp_path / "out.bin"):
        raise ours
    assert e.value is ours  # our own errors pass as they are
    with writing(tmp_path / "out.bin"):
        (tmp_path / "out.bin").write_text("fine")
    assert (tmp_path / "out.bin").read_text() == "fine"


def test_a_writable_folder_has_no_read_only_part(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f").write_text("x")
    assert read_only_part(tmp_path) is None


def test_remove_tree_also_through_read_only_folders_and_never_follows_links(
        tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    folder = tmp_path / "index"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "f").write_text("x")
    os.symlink(keep, folder / "link")
    os.chmod(folder / "inner", 0o500)
    remove_tree(folder)
    assert not folder.exists() and (keep / "precious").is_file()
    link = tmp_path / "alias"
    os.symlink(keep, link)
    remove_tree(link)
    assert not link.exists() and (keep / "precious").is_file()
    remove_tree(tmp_path / "missing")  # missing is fine
