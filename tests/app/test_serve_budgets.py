"""What one request may cost `qtsearch serve` (qtsearch.core.budget,
qtsearch.app.serve.request_limits): the stored text it would read is measured before it is read, an
answer's size before it is built, a search by document stops deepening, a request past its deadline
gets 503, one sure to miss it (by its parameters) 413 before it starts, and /health answers while
the thread pool is full.

The servers are real (uvicorn on a loopback port, in this process or as `qtsearch serve`) over
copies of the session's real flat index; "long" copies hold one row of several megabytes, as
an index built before rows were cut at MAX_SENTENCE_CHARS can.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from serve_fixtures import TOKEN, serving, token_file

pytest.importorskip("fastapi", reason="the [serve] extra is not installed")

#: The row made long, and its length in characters.
LONG_ID = 10
LONG_CHARS = 8 << 20
#: A generous bound on the growth of the server's peak memory while it refuses the long row:
#: measuring it in SQLite maps and copies it once or twice (16 MB); reading and folding it
#: as a hit took over 100 MB.
REFUSED_GROWTH_MB = 48


def lengthen(index: Path, row: int, chars: int) -> str:
    """Row `row` of `index` made `chars` long (its text repeated), the manifest recording the
    new size of the database so that the index opens; returns the row's original text."""
    from qtsearch.index.integrity import FILES, sha256

    db = index / "meta.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as conn:
        (text,) = conn.execute("SELECT text FROM sentences WHERE id = ?", (row,)).fetchone()
        conn.execute("UPDATE sentences SET text = ? WHERE id = ?",
                     (((text + " ") * (chars // (len(text) + 1) + 1))[:chars], row))
        conn.commit()
    manifest = json.loads((index / "manifest.json").read_text(encoding="utf-8"))
    manifest[FILES]["meta.sqlite"] = {"bytes": db.stat().st_size, "sha256": sha256(db)}
    (index / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return text


@pytest.fixture(scope="module")
def long_index(flat: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the flat index whose row LONG_ID holds LONG_CHARS characters, and the text
    that row had (its vector's text: a semantic search for it finds the row first)."""
    index = tmp_path_factory.mktemp("long") / "index"
    shutil.copytree(flat, index)
    return index, lengthen(index, LONG_ID, LONG_CHARS)


def peak_mb(pid: int) -> float:
    """The peak resident memory of process `pid` (VmHWM) in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmHWM:"))) / 1024


@contextlib.contextmanager
def serving_command(index: Path, *options: str) -> Iterator[tuple[str, int]]:
    """`qtsearch serve INDEX OPTIONS` on a free port while the block runs: its URL and pid."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "qtsearch.app.cli", "serve", str(index),
                             "--port", str(port), *options], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the server did not start"
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text[:300]
    body = response.json()
    assert list(body) == ["error"] and "\n" not in body["error"]
    return body["error"]


@pytest.mark.slow
def test_a_long_row_is_refused_before_the_server_reads_it(long_index):
    """The server measures the rows a request would read in SQLite and refuses before their
    text reaches Python: its peak memory barely moves."""
    index, text = long_index
    with serving_command(index, "--max-read-chars", "1000000") as (url, pid), \
            httpx.Client(base_url=url, timeout=120) as c:
        assert c.get("/search", params={"q": "Emma was happy.", "k": 3}).status_code == 200
        assert c.get("/sentences/500", params={"context": 2}).status_code == 200
        before = peak_mb(pid)
        started = time.monotonic()
        found = c.get("/search", params={"q": text, "k": 1, "mode": "semantic"})
        read = re.fullmatch(r"request would read ([\d,]+) characters of stored text: at most "
                            r"1,000,000 \(ask for fewer queries or a smaller k\)",
                            error_of(found, 413))
        assert read and int(read[1].replace(",", "")) >= LONG_CHARS  # with its candidates
        assert "ask for a smaller context" in error_of(c.get(f"/sentences/{LONG_ID}"), 413)
        many = c.post("/search", json={"q": [text] * 100, "k": 100, "mode": "semantic"})
        error_of(many, 413)
        seconds = time.monotonic() - started
        grown = peak_mb(pid) - before
    assert grown < REFUSED_GROWTH_MB, f"peak memory grew {grown:.0f} MB"
    assert seconds < 30


def test_sentences_respect_the_answer_budget(long_index):
    index, _ = long_index
    with serving(index, max_response_bytes=65536) as url, \
            httpx.Client(base_url=url, timeout=120) as c:
        assert error_of(c.get(f"/sentences/{LONG_ID}"), 413) == (
            f"answer of at least {LONG_CHARS:,} bytes: at most 65,536 (ask for a smaller "
            "context)")
        assert c.get("/sentences/500", params={"context": 2}).status_code == 200


def test_search_answers_over_the_budget_are_refused_before_they_are_built(long_index):
    index, text = long_index
    with serving(index, max_response_bytes=65536) as url, \
            httpx.Client(base_url=url, timeout=120) as c:
        error = error_of(c.get("/search", params={"q": text, "k": 1, "mode": "semantic"}),
                         413)
        assert error == (f"answer of at least {LONG_CHARS:,} bytes: at most 65,536 (ask for "
                         "fewer queries or a smaller k)")


def test_search_by_document_stops_deepening(capsys, flat):
    """Two documents cannot fill k=100: the search looks 16 times deeper than its first fetch
    at most, stops when looking deeper found nothing new, and says so; the CLI answers the
    same."""
    from qtsearch.app.cli import main

    query = "She was very happy to see her old friend again."
    with pytest.raises(SystemExit):
        main(["search", str(flat), query, "-k", "100", "--by", "doc", "--json"])
    want = json.loads(capsys.readouterr().out)
    with serving(flat) as url, httpx.Client(base_url=url, timeout=120) as c:
        got = c.post("/search", json={"q": query, "k": 100, "by": "doc"}).json()
    assert [h["id"] for h in got[0]["hits"]] == [h["id"] for h in want[0]["hits"]]
    assert len(got[0]["hits"]) == 2
    assert got[0]["note"] == want[0]["note"]
    assert got[0]["note"].endswith("2 of 100 documents found among the best 1,640 passages; "
                                   "the search looked no deeper")


def test_a_request_past_its_deadline_gets_503(flat):
    """100 queries by document at k=100 is within the results budget; past the request's
    deadline it is answered 503 with Retry-After, not minutes later."""
    queries = [f"She was very happy to see her old friend {n}." for n in range(100)]
    with serving(flat, request_timeout=1.0) as url, \
            httpx.Client(base_url=url, timeout=120) as c:
        started = time.monotonic()
        r = c.post("/search", json={"q": queries, "k": 100, "by": "doc"})
        seconds = time.monotonic() - started
        assert error_of(r, 503).startswith("request still working after 1 s: retry later")
        assert r.headers["retry-after"]
        assert c.get("/search", params={"q": queries[0], "k": 3}).status_code == 200
    assert seconds < 10


def test_a_request_sure_to_miss_its_deadline_is_refused_before_it_starts(flat):
    """10 queries by document at k=1000 rank at least 2,000 passages each (the whole index):
    at least 0.3 s of work, estimated from the parameters, against a deadline of 0.2 s: 413 at
    once, where it would have worked until its deadline. A small search still answers."""
    from qtsearch.app.serve.request_limits import least_seconds

    queries = [f"She was very happy to see her old friend {n}." for n in range(10)]
    least = least_seconds(10, 1000, "doc", 2000)
    assert least > 0.2
    with serving(flat, request_timeout=0.2) as url, \
            httpx.Client(base_url=url, timeout=120) as c:
        started = time.monotonic()
        r = c.post("/search", json={"q": queries, "k": 1000, "by": "doc"})
        seconds = time.monotonic() - started
        assert error_of(r, 413) == (f"10 queries × k 1000 by document: at least {least:.1f} s "
                                    "of work, over the 0.2 s a request may take (ask for fewer "
                                    "queries or a smaller k)")
        assert c.get("/search", params={"q": queries[0], "k": 3}).status_code == 200
    assert seconds < least


def test_health_answers_while_the_thread_pool_is_full(flat, tmp_path):
    """45 requests wait in the thread pool (POST /add, behind the index's writer lock, held
    here as another writer would): /health still answers at once, with a fresh count."""
    from qtsearch.index.lock import writer_lock

    index = tmp_path / "index"
    shutil.copytree(flat, index)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serving(index, token_file(tmp_path)) as url, \
            httpx.Client(base_url=url, timeout=120) as c:
        count = c.get("/health").json()["sentences"]
        statuses: list[int] = []

        def add() -> None:
            with httpx.Client(base_url=url, timeout=120) as own:
                statuses.append(own.post("/add", headers=auth, json={
                    "text": "A posted line about a quiet garden.\n"}).status_code)

        with writer_lock(index, "test"):
            adders = [threading.Thread(target=add) for _ in range(45)]
            for t in adders:
                t.start()
            time.sleep(2)  # every add has taken a thread and waits
            started = time.monotonic()
            health = c.get("/health")
            seconds = time.monotonic() - started
            assert seconds < 1.0, f"/health took {seconds:.1f} s"
            assert health.json() == {"status": "ok", "sentences": count}
            assert not statuses  # still waiting
        for t in adders:
            t.join(120)
        assert statuses == [200] * 45  # one added, the others skipped as the same text
        assert c.get("/health").json()["sentences"] == count + 1
