"""Indexes of real Wikipedia shards (WikiExtractor output): article metadata in hits, filters and
Parquet; context never crosses articles; indexes from before the article columns still open,
search and take Wikipedia sentences through `add`."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from cli_helpers import as_built
from rich.console import Console

from qtsearch.app.cli import main
from qtsearch.app.hit_tables import hits_table
from qtsearch.core.errors import UsageError
from qtsearch.index.store import MetadataStore
from qtsearch.indexing.append import add_to_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher

SHARDS = ["wikipedia/AA/wiki_00.gz", "wikipedia/AB/wiki_50.gz"]
ARTICLE = ("title", "url", "doc_id", "section")
OLD_COLUMNS = ["id", "text", "source", "line", "doc", "position"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        main([*args])
    captured = capsys.readouterr()
    return exit_.value.code or 0, captured.out, captured.err


@pytest.fixture(scope="module")
def wiki(shared_data: Path, tiny_model: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wiki") / "index"
    build_index(IndexConfig(corpus=[str(shared_data / s) for s in SHARDS], model=str(tiny_model),
                            out=str(out), index="flat", device="cpu", parquet=True))
    return out


@pytest.fixture(scope="module")
def rows(wiki: Path) -> list[dict]:
    with MetadataStore.open(wiki / "meta.sqlite") as store:
        return list(store.get(range(store.count())).values())


def test_every_row_has_its_article(wiki, rows):
    assert len(rows) > 10_000
    assert all(r[k] is not None for r in rows for k in ARTICLE)
    by_doc: dict[int, set] = {}
    for r in rows:
        by_doc.setdefault(r["doc"], set()).add((r["title"], r["url"], r["doc_id"]))
    assert all(len(v) == 1 for v in by_doc.values())  # one article per document
    assert len({next(iter(v)) for v in by_doc.values()}) == len(by_doc)
    anarchism = [r for r in rows if r["title"] == "Anarchism"]
    assert anarchism[0]["url"] == "http://en.wikipedia.org/wiki?curid=12"
    assert anarchism[0]["doc_id"] == "12" and anarchism[0]["section"] == ""
    assert "History." not in {r["text"] for r in anarchism}


def test_context_stops_at_the_article_boundary(wiki, rows):
    firsts = [r["id"] for r in rows if r["position"] == 0][1:40]
    with Searcher.open(wiki) as idx:
        for first in firsts:
            for around in (first, first - 1):  # an article's first and the previous one's last
                passage = idx.context(around, 4)
                (record,) = idx.get([around])
                assert {(p.doc, p.title) for p in passage} == {(record.doc, record.title)}
                assert len(passage) < 9  # cut at the boundary, not filled from the neighbour


def test_filters_on_title_id_and_section(wiki, rows):
    query = "The war ended with a peace treaty."
    with Searcher.open(wiki) as idx:
        for mode in ("semantic", "lexical", "hybrid"):
            hits = idx.search([query], 5, mode=mode, where={"title": "Anarchism"})[0]
            assert hits and all(h.title == "Anarchism" for h in hits)
        hits = idx.search([query], 5, mode="semantic", where={"doc_id": "12"})[0]
        assert len(hits) == 5 and all(h.url.endswith("curid=12") for h in hits)
        hits = idx.search([query], 50, mode="semantic", where={"section": "History"})[0]
        assert len(hits) == 50 and all(h.section == "History" for h in hits)
        assert len({h.title for h in hits}) > 5
        with pytest.raises(UsageError, match="title, url, doc_id, section"):
            idx.search([query], 5, where={"chapter": "1"})


def test_hits_show_their_article(capsys, wiki):
    code, out, _ = run(capsys, "search", str(wiki), "anarchism and the state", "-k", "3",
                       "--where", "title=Anarchism", "--json")
    assert code == 0
    (answer,) = json.loads(out)
    for hit in answer["hits"]:
        assert list(hit) == ["id", "score", "text", "source", "line", "doc", "position",
                             *ARTICLE, "legs"]
        assert hit["title"] == "Anarchism"
    with Searcher.open(wiki) as idx:
        hits = idx.search(["anarchism and the state"], 3, where={"title": "Anarchism"})[0]
    console = Console(width=200, record=True)
    console.print(hits_table(hits))
    text = console.export_text()
    assert all((f"Anarchism › {h.section}" if h.section else "Anarchism") in text
               for h in hits)


def test_parquet_holds_the_article_columns(capsys, wiki, rows, tmp_path):
    table = pq.read_table(wiki / "meta.parquet")
    assert table.column_names == OLD_COLUMNS + list(ARTICLE)
    assert table.to_pylist() == sorted(rows, key=lambda r: r["id"])
    code, _, _ = run(capsys, "export", str(wiki), str(tmp_path / "m.parquet"))
    assert code == 0 and pq.read_table(tmp_path / "m.parquet").equals(table)


def test_format_option_refuses_plain_text(capsys, flat, tmp_path):
    corpus = flat.parent / "austen.txt"
    code, _, err = run(capsys, "build-index", str(corpus), "--out", str(tmp_path / "x"),
                       "--format", "wikiextractor", "-q")
    assert code != 0 and err.count("\n") == 1 and "not WikiExtractor output" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def _drop_article_columns(db: Path) -> None:
    """Make `db` what a build before the article columns wrote."""
    conn = sqlite3.connect(db)
    conn.execute("DROP INDEX ix_sentences_title")
    conn.execute("DROP INDEX ix_sentences_doc_id")
    for name in ARTICLE:
        conn.execute(f"ALTER TABLE sentences DROP COLUMN {name}")
    conn.commit()
    conn.close()


def test_an_old_index_opens_searches_and_takes_wikipedia(flat, shared_data, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(flat, old)
    _drop_article_columns(old / "meta.sqlite")
    as_built(old)
    with Searcher.open(old) as idx, Searcher.open(flat) as same:
        hits = idx.search(["She was very happy."], 5)[0]
        assert [h.to_dict() for h in hits] == [h.to_dict() for h in
                                               same.search(["She was very happy."], 5)[0]]
        assert all(list(h.to_dict()) == ["id", "score", *OLD_COLUMNS[1:], "legs"]
                   for h in hits)
        assert idx.context(3, 2) == same.context(3, 2)
    with MetadataStore.open(old / "meta.sqlite") as store:
        assert store.fields == tuple(OLD_COLUMNS)
        store.to_parquet(tmp_path / "old.parquet")
    assert pq.read_table(tmp_path / "old.parquet").column_names == OLD_COLUMNS
    before = len(pq.read_table(tmp_path / "old.parquet"))
    add_to_index(old, [str(shared_data / SHARDS[0])], device="cpu")
    with Searcher.open(old) as idx:
        assert idx.store.fields[-4:] == ARTICLE
        with contextlib.closing(sqlite3.connect(idx.store.path)) as conn:
            plan = conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM sentences WHERE title = 'x'").fetchall()
        assert "ix_sentences_title" in str(plan)  # the upgrade indexed the titles too
        (first,) = idx.get([before])
        assert (first.title, first.position) == ("Anarchism", 0)
        assert idx.get([0])[0].title is None
        hits = idx.search(["anarchism"], 3, mode="lexical", where={"title": "Anarchism"})[0]
        assert hits and all(h.id >= before for h in hits)
