"""`qtsearch serve`: every endpoint, error and status code of a real server on a real index,
its answers checked against the CLI's `--json` output for the same request."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from cli_helpers import as_built
from serve_fixtures import serving

from qtsearch.app.cli import main
from qtsearch.app.serve.app import STATIC

Q1 = "She was very happy to see him again."
Q2 = "Mr. Knightley said nothing."


@pytest.fixture(scope="module")
def base(flat: Path):
    """A server over the shared flat index (no token: read-only)."""
    with serving(flat, max_k=50, max_queries=3, max_body=4096) as url:
        yield url


@pytest.fixture(scope="module")
def client(base: str):
    with httpx.Client(base_url=base, timeout=60) as c:
        yield c


def cli_json(capsys, *args: str) -> tuple[int, object]:
    """`qtsearch ARGS --json` in this process: exit status and the printed JSON."""
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--json"])
    return exit_.value.code or 0, json.loads(capsys.readouterr().out)


def same(got: object, want: object) -> None:
    """Equal JSON, floats to 1e-5 (the CLI's own Index encodes with word projections computed
    in other batches, which moves vectors in the last bits)."""
    if isinstance(want, float):
        assert got == pytest.approx(want, abs=1e-5)
    elif isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want)
        for key in want:
            same(got[key], want[key])
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w)
    else:
        assert got == want


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert list(body) == ["error"] and "\n" not in body["error"]
    return body["error"]


# -- answers: the CLI's JSON ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
def test_get_search_is_the_cli_json(capsys, flat, client, mode):
    r = client.get("/search", params={"q": [Q1, Q2], "k": 4, "mode": mode})
    assert r.status_code == 200
    code, want = cli_json(capsys, "search", str(flat), Q1, Q2, "-k", "4", "--mode", mode)
    assert code == 0
    same(r.json(), want)


def test_post_search_with_filters_is_the_cli_json(capsys, flat, client):
    code, want = cli_json(capsys, "search", str(flat), Q1, "-k", "3", "-w", "doc=1",
                          "-w", "source=austen.txt")
    assert code == 0 and all(h["doc"] == 1 for h in want[0]["hits"])
    for where in (["doc=1", "source=austen.txt"], {"doc": 1, "source": "austen.txt"}):
        r = client.post("/search", json={"q": Q1, "k": 3, "where": where})
        assert r.status_code == 200
        same(r.json(), want)


def test_explained_search_is_the_cli_json(capsys, flat, client):
    query = "She was very happy to see him again."
    code, want = cli_json(capsys, "search", str(flat), query, "-k", "3", "--explain")
    got = client.get("/search", params={"q": query, "k": 3, "explain": "true"})
    assert code == 0 and got.status_code == 200
    same(got.json(), want)
    assert all("explain" in hit for hit in got.json()[0]["hits"])
    posted = client.post("/search", json={"q": query, "k": 3, "explain": True})
    same(posted.json(), want)


def test_neighbours_of_ids_are_the_cli_json(capsys, flat, client):
    code, want = cli_json(capsys, "search", str(flat), "5", "17", "--ids", "-k", "3")
    assert code == 0
    same(client.get("/search", params={"q": ["5", "17"], "ids": "true", "k": 3}).json(), want)
    same(client.post("/search", json={"q": [5, 17], "ids": True, "k": 3}).json(), want)


def test_a_bad_query_fails_alone_with_400(capsys, flat, client):
    code, want = cli_json(capsys, "search", str(flat), Q1, "   ", "-k", "2")
    assert code == 3 and want[1]["error"] == "empty query: type a sentence"
    r = client.post("/search", json={"q": [Q1, "   "], "k": 2})
    assert r.status_code == 400
    same(r.json(), want)


def test_analogy_is_the_cli_json(capsys, flat, client):
    a, b, c = "She was happy.", "She was sad.", "He was happy."
    code, want = cli_json(capsys, "analogy", str(flat), a, b, c, "-k", "3")
    assert code == 0 and want[0]["query"] == f"{a} : {b} :: {c} : ?"
    r = client.post("/analogy", json={"a": a, "b": b, "c": c, "k": 3})
    assert r.status_code == 200
    same(r.json(), want)


def test_info_is_the_cli_json(capsys, flat, client):
    code, want = cli_json(capsys, "info", str(flat))
    assert code == 0
    assert client.get("/info").json() == want


def test_sentence_with_its_context(client, api):
    r = client.get("/sentences/10", params={"context": 2})
    assert r.status_code == 200
    assert r.json() == [rec.to_dict() for rec in api.context(10, 2)]
    assert [s["id"] for s in r.json()] == [8, 9, 10, 11, 12]
    alone = client.get("/sentences/10").json()
    assert alone == [api.get([10])[0].to_dict()]


def test_health(client, api):
    assert client.get("/health").json() == {"status": "ok", "sentences": api.count}


# -- errors and statuses ------------------------------------------------------------------


@pytest.mark.parametrize(("request_", "status", "message"), [
    (("GET", "/search", {"q": Q1, "k": 0}), 400, "k must be between 1 and 50 (got 0)"),
    (("GET", "/search", {"q": Q1, "k": 51}), 400, "k must be between 1 and 50 (got 51)"),
    (("GET", "/search", {"q": Q1, "k": "ten"}), 400,
     "k: Input should be a valid integer, unable to parse string as an integer"),
    (("GET", "/search", {"q": Q1, "explain": "maybe"}), 400,
     "explain: Input should be a valid boolean, unable to interpret input"),
    (("GET", "/search", {"k": 3}), 400, "q: Field required"),
    (("GET", "/search", {"q": Q1, "mode": "fuzzy"}), 400, "unknown search mode 'fuzzy'"),
    (("GET", "/search", {"q": Q1, "where": "colour=red"}), 400, "cannot filter on 'colour'"),
    (("GET", "/search", {"q": Q1, "where": "doc"}), 400, "expected COLUMN=VALUE"),
    (("GET", "/search", {"q": Q1, "where": "doc=x"}), 400, "doc is a whole number"),
    (("GET", "/search", {"q": ["a", "b", "c", "d"]}), 413, "4 queries in one request"),
    (("GET", "/search", {"q": "x", "ids": "true"}), 400, "'x' is not a sentence id"),
    (("GET", "/search", {"q": "99999", "ids": "true"}), 404, "no sentence with id 99999"),
    (("GET", "/sentences/99999", {}), 404, "no sentence with id 99999 (ids run from 0 to"),
    (("GET", "/sentences/-1", {}), 404, "no sentence with id -1"),
    (("GET", "/sentences/abc", {}), 400, "id: "),
    (("GET", "/sentences/3", {"context": 51}), 400, "context must be at most 50"),
    (("GET", "/sentences/3", {"context": -1}), 400, "window must be 0 or more"),
    (("GET", "/nowhere", {}), 404, "no such endpoint: GET /nowhere"),
    (("DELETE", "/search", {}), 405, "DELETE is not allowed on /search"),
    (("POST", "/add", {}), 403, "adding is disabled"),
    (("POST", "/delete", {}), 403, "deleting is disabled"),
])
def test_errors_are_one_json_line_with_a_status(client, request_, status, message):
    method, path, params = request_
    assert message in error_of(client.request(method, path, params=params), status)


def test_bad_post_bodies(client):
    assert "JSON decode error" in error_of(
        client.post("/search", content=b"{not json", headers={"content-type":
                                                              "application/json"}), 400)
    assert error_of(client.post("/search", json={"k": 3}), 400) == "q: Field required"
    assert error_of(client.post("/analogy", json={"a": "x", "b": "y"}), 400) == (
        "c: Field required")
    unknown = error_of(client.post("/analogy", json={"a": "zzqx", "b": "qqzx", "c": "xzzq"}),
                       400)
    assert "none of its words is in the model's vocabulary" in unknown


def test_request_size_is_bounded(client):
    big = {"q": "word " * 2000}
    assert error_of(client.post("/search", json=big), 413) == (
        "request body too large: at most 4,096 bytes")

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(10):
            yield b" " * 1000

    assert "too large" in error_of(client.post("/search", content=chunks(), headers={
        "content-type": "application/json"}), 413)


# -- the page and the docs ----------------------------------------------------------------


def test_page_and_docs_work_offline(client):
    page = client.get("/")
    assert page.status_code == 200 and "<form id=\"search-form\"" in page.text
    for name in ("index.html", "app.js", "app.css"):
        text = (STATIC / name).read_text(encoding="utf-8")
        assert not re.search(r"(?:src|href)=\"(?:https?:)?//|url\(\s*['\"]?(?:https?:)?//|"
                             r"fetch\(\s*['\"`](?:https?:)?//", text), name
        if name != "index.html":
            assert client.get(f"/static/{name}").text == text
    docs = client.get("/docs")
    assert docs.status_code == 200
    urls = re.findall(r"(?:src|href)=['\"]([^'\"]+)", docs.text)
    assert urls and all(u.startswith("/") for u in urls), urls
    assert all(client.get(u).status_code == 200 for u in urls)
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths) == {"/search", "/analogy", "/sentences/{id}", "/info", "/health", "/add",
                          "/delete"}


def test_the_api_page_lists_the_search_parameters(client):
    """GET /search reads its query string whole; the API page still lists every parameter."""
    params = client.get("/openapi.json").json()["paths"]["/search"]["get"]["parameters"]
    assert [p["name"] for p in params] == ["q", "k", "mode", "where", "ids", "rerank", "by",
                                           "explain"]
    assert all(p["in"] == "query" and p["description"] and p["schema"] for p in params)
    assert [p["name"] for p in params if p["required"]] == ["q"]


def test_an_index_without_lexical_files_answers_409_for_words(flat, tmp_path):
    """An index built before BM25 files and the full-text table (simulated by removing the
    files) serves semantic search only: lexical and hybrid requests are a conflict with what
    the index holds."""
    import shutil

    old = Path(shutil.copytree(flat, tmp_path / "old"))
    shutil.rmtree(old / "bm25")
    as_built(old)
    with serving(old) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert "neither BM25 files nor a full-text table" in error_of(
            c.get("/search", params={"q": Q1, "mode": "lexical"}), 409)
        answers = c.get("/search", params={"q": Q1, "k": 3}).json()
        assert set(answers[0]["hits"][0]["legs"]) == {"semantic"}
        info = c.get("/info").json()
        assert info["full_text"] is False and info["bm25"] is False
