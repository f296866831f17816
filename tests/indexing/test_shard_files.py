"""The read stage's shard files (qtsearch.indexing.shards): rows written by a thread behind the
reader come back as written, and a failed write is raised, not lost; the check for lines that
run on into the next one (`SENTENCE_ENDS`)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from qtsearch.indexing import shards
from qtsearch.indexing.pipeline import SENTENCE_ENDS
from qtsearch.text.sentence import Sentence, SentenceRow


def _rows(first: int, n: int) -> list[SentenceRow]:
    """Rows as the reader gives them (`sentence_rows`): a `Sentence`'s fields in order."""
    return [dataclasses.astuple(Sentence(f"Sentence {i} of the corpus.", "corpus.txt", i + 1,
                                         i // 10, i % 10))
            for i in range(first, first + n)]


def test_rows_written_behind_the_reader_read_back_as_written(tmp_path: Path) -> None:
    with shards.rows_behind(tmp_path) as write:
        for shard in range(4):
            write(shard, _rows(shard * 25, 25), shard * 25)
    for shard in range(4):
        back = list(shards.read_rows(shards.rows_path(tmp_path, shard)))
        want = _rows(shard * 25, 25)
        assert back == [(shard * 25 + j, *s) for j, s in enumerate(want)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        shards.rows_path(tmp_path, i).name for i in range(4)]  # no temporary file left


@pytest.mark.parametrize("failing", [0, 2])
def test_a_failed_write_is_raised_at_the_next_write_or_on_leaving(tmp_path: Path,
                                                                  failing: int) -> None:
    shards.rows_path(tmp_path, failing).mkdir()  # a folder where the shard's file goes
    written = []
    with pytest.raises(OSError), shards.rows_behind(tmp_path) as write:
        for shard in range(3):
            write(shard, _rows(shard * 5, 5), shard * 5)
            written.append(shard)
    # shard 0's failure is raised by the write of shard 1; the last one's, by the block's end
    assert written == ([0] if failing == 0 else [0, 1, 2])


def test_a_line_ends_a_sentence_as_the_pattern_it_replaced_says() -> None:
    pattern = re.compile(r"""[.!?…:;"'”’»)\]]\s*$""")
    lines = ["", " ", "He left.", "He left. \t", "He left.\u00a0", "and then", "(so)", "«ok»",
             "a ]", "Who?\u2028", "end\u3000", "wait…", "quoted ’", "x.\u200b", "no:"]
    for line in lines:
        assert (line.rstrip()[-1:] in SENTENCE_ENDS) == bool(pattern.search(line)), line
