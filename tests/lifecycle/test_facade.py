"""qtsearch.Index from end to end with the shipped model on fifty sentences: a real index
folder built, searched, written and checked through the facade alone (seconds)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import qtsearch
from qtsearch.core.errors import InputError, UsageError
from qtsearch.index.names import INDEX_FILE

SUBJECTS = ["The cat", "A farmer", "The old sailor", "My sister", "The doctor"]
DOINGS = ["slept by the warm fire", "walked to the market in the rain",
          "read a long letter from home", "mended the broken fence", "sang an old song",
          "cooked a pot of soup", "watched the ships leave the harbour",
          "planted roses in the garden", "lost a key in the snow", "painted the kitchen blue"]
#: Fifty distinct sentences: every subject with every doing.
SENTENCES = [f"{s} {d}." for s in SUBJECTS for d in DOINGS]


@pytest.fixture
def index(tmp_path: Path):
    with qtsearch.Index.build(SENTENCES, tmp_path / "idx", index="flat") as opened:
        yield opened


def test_a_built_index_finds_its_own_sentences(index: qtsearch.Index) -> None:
    assert len(index) == len(SENTENCES)
    results = index.search("The doctor cooked a pot of soup.", k=3)
    assert isinstance(results, qtsearch.Results)
    assert results.query == "The doctor cooked a pot of soup." and results.note is None
    assert results[0].text == "The doctor cooked a pot of soup."
    assert all(isinstance(hit, qtsearch.Hit) for hit in results) and len(results) == 3
    assert results[0].source.endswith("texts.txt")
    assert results[0].line == SENTENCES.index(results[0].text) + 1  # one text a line


def test_search_many_answers_each_query_as_search_does(index: qtsearch.Index) -> None:
    queries = ["a letter from home", "snow"]
    many = index.search_many(queries, k=4)
    assert [r.query for r in many] == queries
    for query, results in zip(queries, many, strict=True):
        assert [h.id for h in results] == [h.id for h in index.search(query, k=4)]
    with pytest.raises(UsageError, match="list of queries"):
        index.search_many("one string")


def test_settings_given_to_one_search_leave_the_index_as_it_was(index: qtsearch.Index) -> None:
    own = index.settings
    rrf = dataclasses.replace(own, fusion="rrf")
    before = [(h.id, h.score) for h in index.search("a letter from home", k=5, mode="hybrid")]
    one = index.search("a letter from home", k=5, mode="hybrid", settings=rrf)
    assert one.basis.fusion == "rrf" and [(h.id, h.score) for h in one] != before
    (many,) = index.search_many(["a letter from home"], k=5, mode="hybrid", settings=rrf)
    assert [(h.id, h.score) for h in many] == [(h.id, h.score) for h in one]
    assert index.settings is own
    assert [(h.id, h.score) for h in index.search("a letter from home", k=5,
                                                  mode="hybrid")] == before


def test_a_list_given_to_search_still_answers_as_search_many(index: qtsearch.Index) -> None:
    with pytest.warns(DeprecationWarning, match="search_many"):
        old = index.search(["roses"], k=2)
    assert [h.id for h in old[0]] == [h.id for h in index.search("roses", k=2)]


def test_modes_filters_and_documents(index: qtsearch.Index) -> None:
    lexical = index.search("harbour", k=5, mode="lexical")
    assert {h.text for h in lexical} == {f"{s} watched the ships leave the harbour."
                                         for s in SUBJECTS}
    assert [h.line for h in index.search("soup", k=5, where={"doc": 0, "line": 6})] == [6]
    assert len(index.search("soup", k=5, by="doc")) == 1  # one file, one document
    assert index.default_mode == "hybrid"


def test_get_and_context_read_stored_rows(index: qtsearch.Index) -> None:
    (record,) = index.get([7])
    assert isinstance(record, qtsearch.Record) and record.text == SENTENCES[7]
    around = index.context(7, window=1)
    assert [r.text for r in around] == SENTENCES[6:9]
    (near,) = index.search_ids([7], k=3)
    assert len(near) == 3 and 7 not in {h.id for h in near}
    assert len(index.analogy(SENTENCES[0], SENTENCES[1], SENTENCES[10], k=2)) == 2


def test_add_is_searchable_at_once(index: qtsearch.Index) -> None:
    added = index.add(["A lighthouse keeper counted the waves."])
    assert (added.added, added.count, len(index)) == (1, 51, 51)
    assert index.search("lighthouse keeper", k=1)[0].text == (
        "A lighthouse keeper counted the waves.")
    again = index.add(["A lighthouse keeper counted the waves."])  # the same text file
    assert again.added == 0 and again.skipped and len(index) == 51


def test_records_are_upserted_and_deleted_by_id(index: qtsearch.Index) -> None:
    index.add({"apple": "Apples grow in the orchard.", "pear": "Pears ripen in autumn."})
    assert len(index) == 52
    replaced = index.upsert({"pear": "Pears are picked in September."})
    assert (replaced.replaced, replaced.added, len(index)) == (1, 1, 52)
    texts = {h.text for h in index.search("pears", k=5, mode="lexical")}
    assert texts == {"Pears are picked in September."}
    gone = index.delete(["apple", "plum"])
    assert gone.deleted == 1 and "plum" in gone.note and len(index) == 51
    assert not index.search("orchard apples", k=5, mode="lexical")


def test_delete_by_filter_then_check(index: qtsearch.Index) -> None:
    done = index.delete(where={"line": 1})
    assert done.deleted == 1 and len(index) == 49
    assert SENTENCES[0] not in {h.text for h in index.search(SENTENCES[0], k=5)}
    assert index.check() == []
    info = index.info()
    assert info["count"] == 49 and info["index_type"] == "flat" and info["deleted"]


def test_check_names_a_damaged_file(index: qtsearch.Index) -> None:
    path = index.path / INDEX_FILE
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit, the size unchanged
    path.write_bytes(bytes(data))
    assert any("sha256" in problem for problem in index.check())


def test_build_takes_files_and_refuses_unknown_options(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("".join(s + "\n" for s in SENTENCES[:20]), encoding="utf-8")
    with qtsearch.Index.build(notes, tmp_path / "from-file") as index:
        assert len(index) == 20 and index.search("cat", k=1)[0].source == str(notes)
    with qtsearch.Index.build([notes, "One more sentence of its own."], tmp_path / "mixed",
                              index="flat") as index:
        assert len(index) == 21
    with pytest.raises(UsageError, match="unknown option shards"):
        qtsearch.Index.build(SENTENCES, tmp_path / "bad", shards=3)
    with pytest.raises(InputError, match="empty text"):
        qtsearch.Index.build(["fine", "  "], tmp_path / "empty")


def test_an_opened_index_reopens_the_same(index: qtsearch.Index) -> None:
    with qtsearch.Index.open(index.path) as again:
        query = "the sailor sang"
        assert [h.id for h in again.search(query)] == [h.id for h in index.search(query)]


def test_the_facade_module_is_the_package_s_index(shipped_index: Path) -> None:
    from qtsearch.indexing.build_config import IndexConfig
    from qtsearch.lifecycle import facade
    from qtsearch.lifecycle.writers import BUILD_OPTIONS

    assert qtsearch.Index is facade.Index
    assert set(BUILD_OPTIONS) == {f.name for f in dataclasses.fields(IndexConfig)} - {
        "corpus", "model", "out"}
    assert {"index", "split_sentences", "fit", "overwrite"} <= set(BUILD_OPTIONS)
    with pytest.raises(UsageError) as e:
        facade.Index.build(["A text."], shipped_index.parent / "never", shards=3, bogus=1)
    assert str(e.value) == (f"Index.build: unknown option bogus, shards; the options are "
                            f"{', '.join(BUILD_OPTIONS)}")
    assert not (shipped_index.parent / "never").exists()
    with facade.Index.open(shipped_index) as index:
        assert repr(index).startswith(f"Index({str(shipped_index)!r}: ")
        assert index.path == shipped_index and len(index) == index.info()["count"] == 20
        assert index.check() == []
