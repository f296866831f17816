"""`qtsearch delete` and `add --upsert` on real record indexes (BEIR SciFact abstracts, the
shipped model): exactly the rows asked for leave every search, the index stays whole (`check`),
the vectors of the rows kept are the ones they had, BM25 scores are those of an index built
without the deleted records; the writer lock and a kill inside the swap behave as for `add`;
POST /delete needs the token."""

from __future__ import annotations

import gzip
import json
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from test_writers import ENV, KILL_ENV, cli, hold, one_error_line, start_cli, whole

from qtsearch.app.cli import main
from qtsearch.index import open_faiss_index
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher

N_DOCS = 300
MODES = ("semantic", "lexical", "hybrid")


@pytest.fixture(scope="module")
def records(shared_data: Path) -> list[dict]:
    """The first 320 SciFact abstracts: 300 in the index, 20 to add."""
    with gzip.open(shared_data / "beir" / "scifact" / "corpus.jsonl.gz", "rt",
                   encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(N_DOCS + 20), f)]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def base(records: list[dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("base")
    corpus = write_jsonl(folder / "corpus.jsonl", records[:N_DOCS])
    build_index(IndexConfig(corpus=[str(corpus)], out=str(folder / "scifact")))
    return folder / "scifact"


@pytest.fixture
def copy(base: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base, tmp_path / "index"))


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(argv))
    captured = capsys.readouterr()
    return int(done.value.code or 0), captured.out, captured.err


def rows(folder: Path) -> list[tuple]:
    """Every row but its id, in id order."""
    conn = sqlite3.connect(f"file:{folder / 'meta.sqlite'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT text, source, line, doc, position, title, doc_id "
                            "FROM sentences ORDER BY id").fetchall()
    finally:
        conn.close()


def vectors(folder: Path) -> np.ndarray:
    index = open_faiss_index(folder / "index.faiss")
    return index.reconstruct_n(0, index.ntotal)


def found_docs(folder: Path, query: str, mode: str, by: str = "passage") -> set[str]:
    with Searcher.open(folder, device="cpu") as idx:
        (hits,) = idx.search(query, 20, mode, by=by)
    return {h.doc_id for h in hits} | {p.doc_id for h in hits for p in h.passages or ()}


def checked(capsys: pytest.CaptureFixture, folder: Path) -> None:
    code, out, err = run(capsys, "check", str(folder))
    assert code == 0 and ": ok:" in out, out + err


@pytest.mark.slow
def test_delete_by_doc_id_removes_exactly_those_rows(base, copy, records, tmp_path, capsys):
    gone = [records[0], records[7]]
    before = rows(base)
    code, out, err = run(capsys, "delete", str(copy), "--doc-id", gone[0]["_id"],
                         "--doc-id", gone[1]["_id"])
    assert code == 0, err
    kept = [r[6] not in {g["_id"] for g in gone} for r in before]
    assert f"deleted {kept.count(False)} sentences" in out and err == ""
    assert rows(copy) == [r for r, k in zip(before, kept) if k]
    np.testing.assert_array_equal(vectors(copy), vectors(base)[np.array(kept)])
    checked(capsys, copy)
    for record in gone:
        for mode in MODES:
            for by in ("passage", "doc"):
                assert record["_id"] in found_docs(base, record["title"], mode, by)
                assert record["_id"] not in found_docs(copy, record["title"], mode, by)
    # BM25 after a delete is BM25 over the rows left: as in an index built without them
    corpus = write_jsonl(tmp_path / "rest.jsonl", [r for r in records[:N_DOCS]
                                                   if r not in gone])
    build_index(IndexConfig(corpus=[str(corpus)], out=str(tmp_path / "rest")))
    with Searcher.open(copy, device="cpu") as a, \
            Searcher.open(tmp_path / "rest", device="cpu") as b:
        for query in (gone[0]["title"], records[3]["title"], "white matter diffusion"):
            (x,), (y,) = a.search(query, 10, "lexical"), b.search(query, 10, "lexical")
            assert [(h.text, round(h.score, 4)) for h in x] == \
                [(h.text, round(h.score, 4)) for h in y]


@pytest.mark.slow
def test_delete_where_and_the_files_it_empties(base, copy, records, tmp_path, capsys):
    extra = write_jsonl(tmp_path / "extra.jsonl", records[N_DOCS:])
    assert run(capsys, "add", str(copy), str(extra), "-q")[0] == 0
    code, out, err = run(capsys, "delete", str(copy), "--where", "source=extra.jsonl")
    assert code == 0, err
    assert rows(copy) == rows(base)
    manifest = json.loads((copy / "manifest.json").read_text())
    assert [c["path"] for c in manifest["corpus"]] == [c["path"] for c in json.loads(
        (base / "manifest.json").read_text())["corpus"]]  # extra.jsonl is forgotten...
    assert manifest["deleted"][0]["where"] == "source=extra.jsonl"
    code, out, _ = run(capsys, "add", str(copy), str(extra), "-q")
    assert code == 0 and "added 0 " not in out  # ...so adding it again is not skipped
    title = records[5]["title"]
    code, out, err = run(capsys, "delete", str(copy), "-w", f"title={title}")
    assert code == 0, err
    assert not [r for r in rows(copy) if r[5] == title]
    assert records[5]["_id"] not in found_docs(copy, title, "hybrid")
    checked(capsys, copy)


@pytest.mark.slow
def test_a_graph_index_deletes_and_upserts(records, tmp_path, capsys):
    """HNSW cannot remove nodes: its graph is rebuilt from the stored vectors, fold and all
    (a record stored twice under two ids: its passages share their graph nodes)."""
    twin = {**records[10], "_id": "twin-of-10"}
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [*records[:N_DOCS], twin])
    out = tmp_path / "graph"
    build_index(IndexConfig(corpus=[str(corpus)], out=str(out), index="hnsw"))
    before = rows(out)
    with Searcher.open(out, device="cpu") as idx:
        assert idx.backend.fold.nodes < idx.backend.fold.rows == len(before)
        old = idx.backend.reconstruct(np.arange(len(before)))
    code, _, err = run(capsys, "delete", str(out), "--doc-id", records[2]["_id"])
    assert code == 0, err
    kept = np.array([r[6] != records[2]["_id"] for r in before])
    assert rows(out) == [r for r, k in zip(before, kept) if k]
    with Searcher.open(out, device="cpu") as idx:
        fold = idx.backend.fold
        assert idx.backend.ntotal == fold.rows == kept.sum() and fold.nodes < fold.rows
        np.testing.assert_array_equal(idx.backend.reconstruct(np.arange(kept.sum())), old[kept])
    assert records[2]["_id"] not in found_docs(out, records[2]["title"], "semantic")
    checked(capsys, out)
    again = write_jsonl(tmp_path / "again.jsonl", [records[2], records[4]])
    code, _, err = run(capsys, "add", str(out), str(again), "--upsert", "-q")
    assert code == 0, err
    # the same passages again (records[4] replaced by itself), the two records' now last
    assert sorted((r[0], r[6]) for r in rows(out)) == sorted((r[0], r[6]) for r in before)
    ids = {records[2]["_id"], records[4]["_id"]}
    n = sum(r[6] in ids for r in before)
    assert {r[6] for r in rows(out)[-n:]} == ids
    assert json.loads((out / "manifest.json").read_text())["index_type"] == "hnsw"
    for record in (records[2], records[4]):
        assert record["_id"] in found_docs(out, record["title"], "semantic")
    checked(capsys, out)


def test_what_delete_refuses_and_what_it_leaves_alone(copy, records, tmp_path, capsys):
    manifest = (copy / "manifest.json").read_bytes()
    code, out, err = run(capsys, "delete", str(copy), "--doc-id", "no-such-id")
    assert code == 0 and "deleted 0 sentences" in out
    assert err.strip() == "delete: no rows with doc_id no-such-id"
    code, _, err = run(capsys, "delete", str(copy), "--doc-id", "no-such-id",
                       "--doc-id", records[1]["_id"], "--where", "doc=999")
    assert code == 0 and err.strip() == ("delete: no rows with doc_id no-such-id, "
                                         f"{records[1]['_id']} where doc=999 (2 of 2 ids)")
    for argv, status, words in (
            (["--where", "colour=red"], 2, "cannot filter on 'colour'"),
            (["--where", "doc=x"], 2, "doc is a whole number"),
            (["--where", "nonsense"], 2, "expected COLUMN=VALUE"),
            ([], 2, "say which rows: record ids (--doc-id ID"),
            (["--where", "source=corpus.jsonl"], 2,
             "matches all 442 rows; an index cannot be empty")):
        code, _, err = run(capsys, "delete", str(copy), *argv)
        assert code == status and words in err, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("qtsearch: error: ")
    code, _, err = run(capsys, "delete", str(tmp_path / "nowhere"), "--doc-id", "1")
    assert code == 5 and "no such index folder" in err
    assert (copy / "manifest.json").read_bytes() == manifest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


@pytest.mark.slow
def test_upsert_replaces_a_records_passages(base, copy, records, tmp_path, capsys):
    """A record's new version (another abstract's real text under its id) replaces the old
    one in one write; without --upsert both would be there."""
    old, donor = records[3], records[N_DOCS + 4]
    new = {"_id": old["_id"], "title": donor["title"], "text": donor["text"]}
    added = {"_id": "new-1", "title": records[N_DOCS + 9]["title"],
             "text": records[N_DOCS + 9]["text"]}
    path = write_jsonl(tmp_path / "update.jsonl", [new, added])
    n_old = sum(r[6] == old["_id"] for r in rows(base))
    code, out, err = run(capsys, "add", str(copy), str(path), "--upsert", "-q")
    assert code == 0, err
    got = rows(copy)
    mine = [r for r in got if r[6] == old["_id"]]
    assert mine and all(r[0].startswith(donor["title"]) for r in mine)
    assert f"(replacing {n_old})" in out
    assert len(got) == len(rows(base)) - n_old + len(mine) + sum(r[6] == "new-1" for r in got)
    assert [r for r in got if r[6] not in (old["_id"], "new-1")] == \
        [r for r in rows(base) if r[6] != old["_id"]]
    for mode in MODES:
        assert old["_id"] in found_docs(copy, donor["title"], mode)
        assert old["_id"] not in found_docs(copy, old["title"], mode)
    checked(capsys, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["added"][-1]["replaced"] == n_old


# ---------------------------------------------------------------------------------------------
# Other writers, kills, HTTP


@pytest.mark.slow
def test_delete_refuses_a_held_index_or_waits(copy, records):
    before = whole(copy)
    holder = hold(copy)
    try:
        r = cli("delete", str(copy), "--doc-id", records[0]["_id"])
        assert r.returncode == 7, r.stderr
        line = one_error_line(r.stderr)
        assert f"another writer is at work on this index: pid {holder.pid}" in line
        assert "--wait" in line and whole(copy) == before
        waiting = start_cli("delete", str(copy), "--doc-id", records[0]["_id"], "--wait")
        time.sleep(3)
        assert waiting.poll() is None
    finally:
        holder.stdin.close()
        holder.wait(30)
    _, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert f"waiting for pid {holder.pid}" in err
    assert whole(copy) == before - 2


@pytest.mark.slow
@pytest.mark.parametrize(("point", "exchange", "kept"), [("before-swap", True, "old"),
                                                         ("between-renames", False, "old"),
                                                         ("after-exchange", True, "new")])
def test_delete_killed_mid_way_leaves_a_whole_index(point, exchange, kept, copy, records):
    before = whole(copy)
    env = {**ENV, KILL_ENV: point, **({} if exchange else {"QTSEARCH_NO_EXCHANGE": "1"})}
    r = cli("delete", str(copy), "--doc-id", records[0]["_id"], env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert cli("info", str(copy)).returncode == 0  # a reader restores what needs restoring
    assert whole(copy) == (before if kept == "old" else before - 2)
    r = cli("delete", str(copy), "--doc-id", records[0]["_id"])
    assert r.returncode == 0, r.stderr
    assert whole(copy) == before - 2
    assert sorted(p.name for p in copy.parent.iterdir()) == ["index"]
    assert cli("check", str(copy)).returncode == 0


@pytest.mark.slow
def test_http_delete_needs_the_token_and_answers_counts(copy, records, tmp_path):
    import httpx
    from serve_fixtures import TOKEN, serving, token_file

    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"doc_ids": [records[0]["_id"]]}
    with serving(copy) as url, httpx.Client(base_url=url, timeout=120) as c:
        r = c.post("/delete", json=body, headers=auth)
        assert r.status_code == 403 and "deleting is disabled" in r.json()["error"]
    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url,
                                                                timeout=120) as c:
        before = c.get("/health").json()["sentences"]
        r = c.post("/delete", json=body)
        assert r.status_code == 401 and "POST /delete needs" in r.json()["error"]
        r = c.post("/delete", json=body, headers={"Authorization": "Bearer nope"})
        assert r.status_code == 403
        r = c.post("/delete", json={"where": "colour=red"}, headers=auth)
        assert r.status_code == 400 and "cannot filter on" in r.json()["error"]
        assert c.get("/health").json()["sentences"] == before
        r = c.post("/delete", json={**body, "where": ["source=corpus.jsonl"]}, headers=auth)
        assert r.status_code == 200, r.text
        assert (r.json()["deleted"], r.json()["count"]) == (2, before - 2)
        hits = c.get("/search", params={"q": records[0]["title"], "k": 20}).json()[0]["hits"]
        assert hits and records[0]["_id"] not in {h["doc_id"] for h in hits}
        r = c.post("/delete", json={"where": {"title": records[1]["title"]}}, headers=auth)
        assert r.json()["deleted"] > 0
        r = c.post("/delete", json={"doc_ids": ["no-such-id"]}, headers=auth)
        assert r.json()["deleted"] == 0 and "no rows with doc_id no-such-id" in r.json()["note"]
        new = {"_id": records[2]["_id"], "title": "Replaced", "text": records[N_DOCS]["text"]}
        r = c.post("/add", json={"text": json.dumps(new) + "\n", "source": "new.jsonl",
                                 "upsert": True}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.json()["replaced"] > 0 and r.json()["added"] > 0
        after = c.get("/health").json()["sentences"]
    assert whole(copy) == after


@pytest.mark.parametrize("key", ["SQ8", "IVF8,SQ8", "IVF8,PQ16x4,Refine(SQfp16)"])
def test_compaction_keeps_every_code_of_the_rows_kept(key, base, tmp_path):
    """Quantised and inverted-file indexes lose rows without re-encoding the others: every
    kept row scores as before under its new id (all lists probed: exhaustive)."""
    import faiss

    from qtsearch.index.compact import keep_rows
    from qtsearch.index.faiss_backend import FaissBuilder

    x = vectors(base)
    builder = FaissBuilder(key, x.shape[1])
    builder.train(x)
    builder.add(x)
    builder.write(tmp_path / "a.faiss")
    keep = np.random.default_rng(0).random(len(x)) > 0.3
    assert keep_rows(tmp_path / "a.faiss", tmp_path / "b.faiss", keep) == keep.sum()
    old, new = open_faiss_index(tmp_path / "a.faiss"), open_faiss_index(tmp_path / "b.faiss")
    assert new.ntotal == keep.sum()
    new_id = np.cumsum(keep) - 1
    for index in (old, new):
        if "IVF" in key:
            faiss.ParameterSpace().set_index_parameter(index, "nprobe", 8)
    (s_old, i_old), (s_new, i_new) = old.search(x[:20], len(x)), new.search(x[:20], len(x))
    for q in range(20):
        want = {int(new_id[i]): s for s, i in zip(s_old[q], i_old[q]) if i >= 0 and keep[i]}
        got = {int(i): s for s, i in zip(s_new[q], i_new[q]) if i >= 0}
        assert got.keys() == want.keys()
        np.testing.assert_allclose([got[i] for i in want], list(want.values()), atol=1e-5)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_upsert_may_replace_every_record(kind, records, tmp_path, capsys):
    """Only `delete` refuses to empty an index: an upsert of every record passes through an
    empty index inside its one write, and ends whole."""
    old = write_jsonl(tmp_path / "old.jsonl", records[:3])
    build_index(IndexConfig(corpus=[str(old)], out=str(tmp_path / "idx"), index=kind))
    new = write_jsonl(tmp_path / "new.jsonl", [{**r, "title": d["title"], "text": d["text"]}
                                               for r, d in zip(records[:3], records[3:6])])
    code, out, err = run(capsys, "add", str(tmp_path / "idx"), str(new), "--upsert", "-q")
    assert code == 0, err
    got = rows(tmp_path / "idx")
    assert f"added {len(got)} sentences (replacing " in out
    assert {r[6] for r in got} == {r["_id"] for r in records[:3]}
    assert all(r[1] == str(new) for r in got)
    checked(capsys, tmp_path / "idx")
    assert [c["path"] for c in json.loads(
        (tmp_path / "idx" / "manifest.json").read_text())["corpus"]] == [str(new)]
