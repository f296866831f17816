"""qtsearch.search.filters: `where` mappings as one SQL condition, checked against the columns,
run on a real SQLite table of the index schema and through a real index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import GRID_SENTENCES

import qtsearch
from qtsearch.core.errors import UsageError
from qtsearch.index.schema import COLUMNS
from qtsearch.search.filters import NO_FILTER, SQLITE_MAX, make_filter, parse_where

ROWS = [  # id, text, source, line, doc
    (0, "one", "/data/emma.txt", 1, 0),
    (1, "two", "/data/emma.txt", 2, 0),
    (2, "three", "/data/persuasion.txt", 1, 1),
    (3, "four", "/other/emma.txt", 5, 2),
    (4, "five", "/data/a_b.txt", 1, 3),
    (5, "six", "/data/axb.txt", 1, 4),
    (6, "seven", "/data/100%.txt", 1, 5),
    (7, "eight", "/data/1000.txt", 1, 6),
]


@pytest.fixture(scope="module")
def table() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE sentences (id INTEGER PRIMARY KEY, text TEXT, source TEXT, "
               "line INTEGER, doc INTEGER)")
    db.executemany("INSERT INTO sentences VALUES (?, ?, ?, ?, ?)", ROWS)
    return db


def matching(db: sqlite3.Connection, where: dict) -> list[int]:
    f = make_filter(where, ["id", "text", "source", "line", "doc"])
    return [r[0] for r in db.execute(
        f"SELECT id FROM sentences WHERE {f.clause} ORDER BY id", f.params)]


def test_no_where_is_no_filter() -> None:
    assert make_filter(None, list(COLUMNS)) is NO_FILTER
    assert make_filter({}, list(COLUMNS)) is NO_FILTER
    assert not NO_FILTER and NO_FILTER.clause == "" and NO_FILTER.params == ()


def test_columns_are_anded_and_values_bound() -> None:
    f = make_filter({"doc": "3", "title": "Emma"}, list(COLUMNS))
    assert f.clause == 'sentences."doc" = ? AND sentences."title" = ?'
    assert f.params == (3, "Emma")  # a numeric column's value as a whole number
    assert f.text == "doc=3 and title=Emma" and bool(f)


def test_source_matches_the_path_or_its_file_name(table: sqlite3.Connection) -> None:
    assert matching(table, {"source": "emma.txt"}) == [0, 1, 3]
    assert matching(table, {"source": "/data/emma.txt"}) == [0, 1]
    assert matching(table, {"source": "mma.txt"}) == []  # a whole file name, not a suffix
    assert matching(table, {"source": "emma.txt", "doc": 2}) == [3]


def test_like_wildcards_in_a_file_name_match_only_themselves(table: sqlite3.Connection) -> None:
    assert matching(table, {"source": "a_b.txt"}) == [4]  # not axb.txt
    assert matching(table, {"source": "100%.txt"}) == [6]  # not 1000.txt


def test_an_unknown_column_is_named_with_the_usable_ones() -> None:
    with pytest.raises(UsageError) as e:
        make_filter({"author": "Austen"}, ["id", "text", "source", "line"])
    assert str(e.value) == "cannot filter on 'author': the columns are id, source, line"
    with pytest.raises(UsageError, match="cannot filter on 'text'"):
        make_filter({"text": "one"}, ["id", "text", "source"])


def test_a_numeric_column_refuses_words_and_huge_numbers() -> None:
    with pytest.raises(UsageError, match=r"filter line='two': line is a whole number"):
        make_filter({"line": "two"}, list(COLUMNS))
    with pytest.raises(UsageError, match="out of range"):
        make_filter({"doc": SQLITE_MAX + 1}, list(COLUMNS))
    assert make_filter({"doc": SQLITE_MAX}, list(COLUMNS)).params == (SQLITE_MAX,)


def test_parse_where_options() -> None:
    assert parse_where(None) == {}
    assert parse_where(["source=emma.txt", " doc = 3 ", "title=a=b"]) == {
        "source": "emma.txt", "doc": "3", "title": "a=b"}
    for bad in ("source", "=emma.txt", " =x"):
        with pytest.raises(UsageError, match="expected COLUMN=VALUE"):
            parse_where([bad])


def test_filters_through_a_real_index(shipped_index: Path) -> None:
    with qtsearch.Index.open(shipped_index) as index:
        every = index.search("soup", k=len(GRID_SENTENCES), where={"source": "texts.txt"})
        assert len(every) == len(GRID_SENTENCES)
        assert [h.line for h in index.search("soup", k=5, where={"line": "4"})] == [4]
        assert len(index.search("soup", k=5, where={"source": "other.txt"})) == 0
        with pytest.raises(UsageError, match="cannot filter on 'author'"):
            index.search("soup", k=5, where={"author": "x"})
