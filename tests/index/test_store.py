"""MetadataStore: real SQLite files, toy rows (unit tests of the table contract)."""

from __future__ import annotations

import sqlite3

import pyarrow.parquet as pq
import pytest

from qtsearch.core.errors import OutputError, UnusableIndex
from qtsearch.index.store import MetadataStore

ROWS = [
    (0, "The cat sat.", "a.txt", 1, 0, 0),
    (1, "It was happy.", "a.txt", 1, 0, 1),
    (2, "Then it slept.", "a.txt", 2, 0, 2),
    (3, "Rain fell.", "b.txt", 1, 1, 0),
    (4, "Nobody came — “quoted” ünïcode.", "b.txt", 3, 1, 1),
]


@pytest.fixture()
def store(tmp_path):
    s = MetadataStore.create(tmp_path / "meta.sqlite")
    s.insert_many(ROWS)
    yield s
    s.close()


def test_schema_wal_and_index(store, tmp_path):
    conn = sqlite3.connect(tmp_path / "meta.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in conn.execute("PRAGMA table_info(sentences)")]
    assert cols == ["id", "text", "source", "line", "doc", "position",
                    "title", "url", "doc_id", "section"]  # Wikipedia articles' metadata
    indexes = [r[1] for r in conn.execute("PRAGMA index_list(sentences)")]
    cols_of = {name: [r[2] for r in conn.execute(f"PRAGMA index_info({name})")]
               for name in indexes}
    assert ["doc", "position"] in cols_of.values()
    assert ["title"] in cols_of.values() and ["doc_id"] in cols_of.values()  # filters
    conn.close()


def test_count_get_context(store):
    assert store.count() == 5
    assert store.max_id() == 4 and store.max_doc() == 1
    got = store.get([4, 0, 99, -1])
    assert set(got) == {0, 4}
    assert got[4] == dict(zip(("id", "text", "source", "line", "doc", "position", "title",
                               "url", "doc_id", "section"), (*ROWS[4], None, None, None, None),
                              strict=True))
    ctx = store.context(0, 1, 1)
    assert [r["id"] for r in ctx] == [0, 1, 2]
    assert [r["id"] for r in store.context(0, 2, 0)] == [2]
    assert store.context(7, 0, 3) == []


def test_get_many_ids_in_chunks(tmp_path):
    """More ids than SQLite allows bound parameters in one statement."""
    s = MetadataStore.create(tmp_path / "m.sqlite")
    s.insert_many((i, f"s{i}", "x", i, i // 10, i % 10) for i in range(40_000))
    got = s.get(range(40_000))
    assert len(got) == 40_000 and got[39_999]["text"] == "s39999"
    s.close()


def test_insert_is_one_transaction(store):
    with pytest.raises(Exception, match="UNIQUE"):
        store.insert_many([(5, "new", "c.txt", 1, 2, 0), (0, "dup id", "c.txt", 2, 2, 1)])
    assert store.count() == 5  # the first row of the failed batch was rolled back


def test_parquet_equals_sqlite(store, tmp_path):
    n = store.to_parquet(tmp_path / "m.parquet")
    table = pq.read_table(tmp_path / "m.parquet")
    assert n == 5 and table.column_names == ["id", "text", "source", "line", "doc", "position",
                                             "title", "url", "doc_id", "section"]
    assert [tuple(r.values()) for r in table.to_pylist()] == [(*r, None, None, None, None)
                                                              for r in ROWS]


def test_readonly_and_errors(store, tmp_path):
    store.checkpoint()
    ro = MetadataStore.open(tmp_path / "meta.sqlite")
    assert ro.count() == 5
    with pytest.raises(OutputError, match="read-only"):
        ro.insert_many([(9, "x", "y", 1, 1, 1)])
    ro.close()
    with pytest.raises(UnusableIndex, match="missing"):
        MetadataStore.open(tmp_path / "nope.sqlite")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(UnusableIndex, match="not a readable SQLite"):
        MetadataStore.open(bad)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(UnusableIndex, match="no `sentences` table"):
        MetadataStore.open(other)
    with pytest.raises(OutputError, match="already exists"):
        MetadataStore.create(tmp_path / "meta.sqlite")


# -- read side of the full-text table ------------------------------------------------------------

@pytest.fixture()
def fts(store, tmp_path):
    store.fts_create()
    store.fts_fill(0)
    store.checkpoint()
    ro = MetadataStore.open(tmp_path / "meta.sqlite")
    yield ro
    ro.close()


def test_columns_and_ids_where(fts):
    assert fts.columns() == ["id", "text", "source", "line", "doc", "position", "title", "url",
                             "doc_id", "section"]
    assert fts.ids_where("sentences.doc = ?", (0,)).tolist() == [0, 1, 2]
    assert fts.ids_where("sentences.source = ? AND line > ?", ("b.txt", 1)).tolist() == [4]
    assert fts.ids_where("sentences.doc = ?", (9,)).tolist() == []


def test_bm25_ranks_rows_that_hold_the_words(fts):
    hits = fts.bm25('"rain" OR "cat"', 10)
    assert sorted(i for i, _ in hits) == [0, 3] and all(s > 0 for _, s in hits)
    assert fts.bm25('"cat"', 10, "sentences.doc = ?", (1,)) == []
    assert [i for i, _ in fts.bm25('"unicode"', 10)] == [4]  # diacritics folded: ünïcode
    assert [i for i, _ in fts.bm25('"it"', 1, ranked=False)] == [1]
    assert fts.term_rows("it", 10) == 2 and fts.term_rows("it", 1) == 1


@pytest.mark.parametrize("word", ['"', 'a"b', "AND", "*", "NEAR(x", "col:x", "^", ""])
def test_fts_phrase_quotes_anything(fts, word):
    from qtsearch.index.schema import fts_phrase

    assert fts.term_rows(word, 5) == 0
    assert fts.bm25(fts_phrase(word), 5) == []
