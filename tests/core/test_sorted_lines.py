"""qtsearch.core.sorted_lines: sorted strings as a blob and offsets, searched in place."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from qtsearch.core.sorted_lines import find_line, line_blob

WORDS = sorted(["zebra", "apple", "émigré", "Zoo", "naïve", "a", "ab", "abc", "日本", "b c"])


def test_the_blob_is_the_lines_each_with_a_newline_and_offsets_where_they_start() -> None:
    blob, offsets = line_blob(["a", "bé", ""])
    assert blob == b"a\nb\xc3\xa9\n\n"
    assert offsets.dtype == np.int64 and offsets.tolist() == [0, 2, 6, 7]


def test_every_line_is_found_at_its_number() -> None:
    blob, offsets = line_blob(WORDS)
    for i, word in enumerate(WORDS):
        assert find_line(blob, offsets, word) == i, word


def test_absent_keys_and_prefixes_are_not_found() -> None:
    blob, offsets = line_blob(WORDS)
    for key in ("", "abcd", "Zo", "zebras", "émigr", "日", "b", "~"):
        assert find_line(blob, offsets, key) is None, key
    empty_blob, empty_offsets = line_blob([])
    assert empty_blob == b"" and empty_offsets.tolist() == [0]
    assert find_line(empty_blob, empty_offsets, "a") is None


def test_sorted_str_is_the_utf8_byte_order() -> None:
    assert [w.encode() for w in WORDS] == sorted(w.encode() for w in WORDS)


def test_found_in_a_memory_map_and_a_uint8_array(tmp_path: Path) -> None:
    blob, offsets = line_blob(WORDS)
    path = tmp_path / "words.bin"
    path.write_bytes(blob)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert find_line(mapped, offsets, "naïve") == WORDS.index("naïve")
        assert find_line(mapped, offsets, "nothing") is None
    array = np.frombuffer(blob, dtype=np.uint8)
    assert find_line(array, offsets, "日本") == WORDS.index("日本")
