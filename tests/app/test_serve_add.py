"""`qtsearch serve` under concurrent clients: POST /add and its token, queries answered while an
add runs (never half of one), adds serialised, one `Searcher` shared by many threads, the server
started and stopped through the real CLI, and several worker processes."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serve_fixtures import TOKEN, serving, token_file

from qtsearch.text.reader import read_sentences

BOOK = "gutenberg/0058-melville-herman--bartleby-the-scrivener-a-story-of-wall-street.txt.gz"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERIES = ["She was very happy to see him again.", "Mr. Knightley said nothing.",
           "Bartleby the scrivener", "a letter from her sister"]


def bartleby(shared_data: Path, start: int, n: int) -> list[str]:
    """Real sentences that the Austen test index does not hold (Melville), one a line."""
    sentences = read_sentences([str(shared_data / BOOK)], split=True)
    return [" ".join(s.text.split()) for s in itertools.islice(sentences, start, start + n)]


@pytest.fixture
def copy(flat: Path, tmp_path: Path) -> Path:
    """A copy of the shared flat index that a test may add to."""
    return Path(shutil.copytree(flat, tmp_path / "index"))


def error_of(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_add_needs_the_token(copy, tmp_path):
    with serving(copy, token_file(tmp_path), max_add_bytes=8192) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        body = {"text": "A new sentence.\n"}
        r = c.post("/add", json=body)
        assert "Authorization: Bearer TOKEN" in error_of(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
        assert error_of(c.post("/add", json=body, headers={"Authorization": "Basic abc"}),
                        401)
        assert error_of(c.post("/add", json=body, headers={"Authorization": "Bearer nope"}),
                        403) == "wrong token"
        assert error_of(c.post("/add", json={}, headers={"Authorization": "Bearer x"}),
                        403) == "wrong token"  # the token is checked before the body
        assert "a file name of letters" in error_of(
            c.post("/add", json={**body, "source": "../x.txt"}, headers=AUTH), 400)
        assert "--format must be one of" in error_of(
            c.post("/add", json={**body, "format": "xml"}, headers=AUTH), 400)
        assert "request body too large" in error_of(
            c.post("/add", json={"text": "Words. " * 2000}, headers=AUTH), 413)
        assert c.get("/health").json()["sentences"] == 2000  # nothing was added


def test_add_appends_as_qtsearch_add_does(copy, tmp_path, shared_data):
    lines = bartleby(shared_data, 0, 30)
    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url, timeout=120) as c:
        before = c.get("/health").json()["sentences"]
        r = c.post("/add", json={"text": "\n".join(lines) + "\n", "source": "bartleby.txt"},
                   headers=AUTH)
        assert r.status_code == 200, r.text
        result = r.json()
        assert result["added"] == len(lines) and result["count"] == before + len(lines)
        assert result["note"].startswith("add: one sentence per line, as this index was built")
        assert c.get("/health").json()["sentences"] == before + len(lines)
        assert c.get("/info").json()["count"] == before + len(lines)
        new = c.get(f"/sentences/{before}").json()
        assert new[0]["text"] == lines[0] and new[0]["source"].endswith("/bartleby.txt")
        assert new[0]["doc"] == 2 and new[0]["position"] == 0  # documents continue
        hits = c.get("/search", params={"q": "Bartleby", "mode": "lexical", "k": 5,
                                        "where": "source=bartleby.txt"}).json()[0]["hits"]
        assert hits and all(h["id"] >= before and "bartleby" in h["text"].lower() for h in hits)
    # the folder on disk is a whole index that the CLI opens as any other
    from qtsearch.search.searcher import Searcher

    with Searcher.open(copy, device="cpu") as idx:
        assert idx.count == before + len(lines) and idx.get([before])[0].text == lines[0]


def test_queries_during_an_add_see_the_index_before_or_after(copy, tmp_path, shared_data):
    lines = bartleby(shared_data, 0, 200)
    stop = threading.Event()
    seen: list[tuple[str, int, object]] = []

    def client(n: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            for i in itertools.count(n):
                if stop.is_set():
                    return
                q = QUERIES[i % len(QUERIES)]
                mode = ("hybrid", "semantic", "lexical")[i % 3]
                r = c.get("/search", params={"q": q, "k": 5, "mode": mode})
                seen.append((f"{mode}: {q}", r.status_code, r.json()))
                h = c.get("/health")
                seen.append(("health", h.status_code, h.json()))

    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url, timeout=120) as c:
        before = c.get("/health").json()["sentences"]
        with ThreadPoolExecutor(4) as pool:
            clients = [pool.submit(client, n) for n in range(4)]
            time.sleep(0.5)
            during = len(seen)
            r = c.post("/add", json={"text": "\n".join(lines)}, headers=AUTH)
            after = len(seen)
            time.sleep(0.5)
            stop.set()
            for f in clients:
                f.result()
        assert r.status_code == 200, r.text
        assert c.get("/health").json()["sentences"] == before + len(lines)
    assert during > 0 and after > during  # queries were answered while the add ran
    counts = set()
    for kind, status, body in seen:
        assert status == 200, body
        if kind == "health":
            counts.add(body["sentences"])
            continue
        (answer,) = body
        assert answer["error"] is None
        for hit in answer["hits"]:
            assert 0 <= hit["id"] < before + len(lines) and hit["text"]
        # a lexical query may match fewer than k sentences, and so may a hybrid one whose
        # words (stop-words aside) are in neither the model nor the index until the add
        if kind.startswith("semantic") or (kind.startswith("hybrid") and "Bartleby" not in kind):
            assert len(answer["hits"]) == 5, kind
    assert counts <= {before, before + len(lines)} and before + len(lines) in counts


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_what_a_server_holds_is_kept_out_of_full_collections(flat):
    """Once a server is up, the objects alive (its index, model, app) are frozen out of the
    collector's passes, so a full pass no longer walks them; settling again (after an index
    is replaced) first collects what was frozen and has become garbage since."""
    from qtsearch.app.serve.served import settle_heap

    try:
        with serving(flat) as url:
            assert gc.get_freeze_count() > 0
            assert httpx.get(f"{url}/search", params={"q": QUERIES[0]}).status_code == 200
        held = _Node()
        gone = weakref.ref(held)
        settle_heap()
        del held
        gc.collect()
        assert gone() is not None  # frozen: the collector no longer looks at it
        settle_heap()
        assert gone() is None
    finally:
        gc.unfreeze()


def test_concurrent_adds_are_serialised(copy, tmp_path, shared_data):
    parts = [bartleby(shared_data, 40 * n, 40) for n in range(3)]
    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url, timeout=120) as c:
        before = c.get("/health").json()["sentences"]
        with ThreadPoolExecutor(3) as pool:
            rs = list(pool.map(lambda p: c.post("/add", json={"text": "\n".join(p)},
                                                headers=AUTH), parts))
        assert [r.status_code for r in rs] == [200] * 3
        assert sorted(r.json()["count"] for r in rs) == [before + 40, before + 80, before + 120]
        texts = [s["text"] for s in c.get(f"/sentences/{before + 60}",
                                          params={"context": 50}).json()]
        assert c.get("/health").json()["sentences"] == before + 120
    assert sorted(texts) == sorted(next(p for p in parts if texts[0] in p))  # one whole add


def test_one_index_shared_by_many_threads(api):
    """Searches, neighbours, analogies and contexts from 8 threads at once give what they give
    one at a time (the store's connection and the lexical worker are shared)."""
    calls = [lambda q=q, m=m: api.search([q], 5, mode=m)[0]
             for q in QUERIES for m in ("hybrid", "semantic", "lexical")]
    calls += [lambda i=i: api.search_ids([i], 5)[0] for i in (3, 300, 1500)]
    calls += [lambda: api.analogy("She was happy.", "She was sad.", "He was happy.", 5)]
    calls += [lambda i=i: api.context(i, 3) for i in (0, 999, 1999)]
    want = [[(h.id, round(getattr(h, "score", 0.0), 4)) for h in f()] for f in calls]
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda n: [(h.id, round(getattr(h, "score", 0.0), 4))
                                       for h in calls[n % len(calls)]()],
                            range(40 * len(calls))))
    assert got == [want[n % len(calls)] for n in range(len(got))]


def test_queries_leave_other_threads_faiss_thread_count(tmp_path_factory, shared_data,
                                                         tiny_model):
    """faiss runs a few HNSW queries on one OpenMP thread: a setting of the calling thread
    only, so queries in the server's threads never change another thread's count."""
    import faiss
    from query_fixtures import small_index

    from qtsearch.search.searcher import Searcher

    with Searcher.open(small_index(tmp_path_factory, shared_data, tiny_model, "hnsw"),
                    device="cpu") as idx:
        faiss.omp_set_num_threads(3)
        try:
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda q: idx.search([q], 5, mode="semantic"), QUERIES * 10))
                assert faiss.omp_get_max_threads() == 3
            assert faiss.omp_get_max_threads() == 3
        finally:
            faiss.omp_set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))


def test_a_serving_worker_holds_blas_to_one_thread(flat):
    """While a server runs it holds numpy's BLAS to one thread (`ONE_BLAS_THREAD`, what a
    query's own small products take): its requests are the parallelism, and BLAS threads
    spinning after each small product took the other requests' cores. Let go when it stops,
    so the count the process had comes back."""
    from qtsearch.core.blas import ONE_BLAS_THREAD

    assert ONE_BLAS_THREAD._users == 0
    with serving(flat) as url:
        assert ONE_BLAS_THREAD._users == 1
        httpx.get(f"{url}/search", params={"q": "She laughed."}, timeout=60
                  ).raise_for_status()
        assert ONE_BLAS_THREAD._users == 1
    assert ONE_BLAS_THREAD._users == 0


# -- through the real command -----------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(*args: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "qtsearch.app.cli", "serve", *args,
                             "--port", str(port)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the server did not start: {proc.communicate()}")


def _stop(proc: subprocess.Popen) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_serve_starts_a_worker_per_core_by_itself():
    """Without --workers: one worker process per core (a worker's requests run Python on one
    core at a time), at most AUTO_WORKERS; one when queries are encoded on a GPU."""
    from qtsearch.app.commands.serve import AUTO_WORKERS, default_workers

    assert [default_workers("cpu", n) for n in (1, 2, 4)] == [1, 2, 4]
    assert default_workers("cpu", 64) == AUTO_WORKERS
    assert default_workers("cuda", 16) == default_workers("auto", 16) == 1


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["--workers", "1"]])
def test_the_command_serves_and_stops_on_ctrl_c(flat, workers):
    from qtsearch.app.commands.serve import default_workers
    from qtsearch.core.device import cpus

    proc, url = _start(str(flat), *workers)
    try:
        assert httpx.get(f"{url}/search", params={"q": QUERIES[0]}).status_code == 200
    finally:
        code, out, err = _stop(proc)
    assert code == 0, err
    n = int(workers[1]) if workers else default_workers("cpu", cpus())
    assert url in out and out.startswith(f"serving {flat} (2,000 sentences, flat index")
    assert (f"with {n} worker processes" in out) == (n > 1)


@pytest.mark.slow
def test_the_command_errors_in_one_line(tmp_path, flat):
    run = subprocess.run([sys.executable, "-m", "qtsearch.app.cli", "serve", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 5 and run.stderr.count("\n") == 1
    assert run.stderr.startswith("qtsearch: error: ")
    short = tmp_path / "short.txt"
    short.write_text("abc\n")
    run = subprocess.run([sys.executable, "-m", "qtsearch.app.cli", "serve", str(flat),
                          "--token-file", str(short)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and "at least 16 characters" in run.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        run = subprocess.run([sys.executable, "-m", "qtsearch.app.cli", "serve", str(flat),
                              "--port", port], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and run.stderr == (
        f"qtsearch: error: cannot listen on 127.0.0.1 port {port}: Address already in use\n")
    code = ("import sys; sys.modules['fastapi'] = None; from qtsearch.app.cli import main; "
            f"main(['serve', {str(flat)!r}])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 2 and run.stderr == (
        "qtsearch: error: qtsearch serve needs the [serve] extra (fastapi missing): "
        "pip install 'qtsearch[serve]'\n")


def _workers(pid: int) -> set[int]:
    """The worker processes of server `pid` (its children that multiprocessing spawned)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return {int(c) for c in children
            if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()}


@pytest.mark.slow
@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists(),
                    reason="finds the workers in /proc/PID/task/PID/children")
def test_a_worker_that_dies_is_replaced(flat):
    """SIGKILL one of two workers: the server goes on answering, a new worker takes the dead
    one's place, and Ctrl-C still stops everything with status 0."""
    proc, url = _start(str(flat), "--workers", "2")
    try:
        deadline = time.monotonic() + 60
        while len(workers := _workers(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(workers) == 2
        victim = min(workers)
        os.kill(victim, signal.SIGKILL)
        while (victim in (now := _workers(proc.pid)) or len(now) < 2) and \
                time.monotonic() < deadline:
            assert httpx.get(f"{url}/health", timeout=30).status_code == 200
            time.sleep(0.1)
        assert victim not in now and len(now) == 2
        for _ in range(10):  # new connections, to either worker
            assert httpx.get(f"{url}/search", params={"q": QUERIES[0]},
                             timeout=60).status_code == 200
    finally:
        code, _, err = _stop(proc)
    assert code == 0, err


@pytest.mark.slow
def test_worker_processes_all_see_an_add(copy, tmp_path, shared_data):
    proc, url = _start(str(copy), "--workers", "2", "--token-file", str(token_file(tmp_path)))
    try:
        with httpx.Client(base_url=url, timeout=120) as c:
            before = c.get("/health").json()["sentences"]
            lines = bartleby(shared_data, 0, 25)
            r = c.post("/add", json={"text": "\n".join(lines)}, headers=AUTH)
            assert r.status_code == 200, r.text
            # new connections, spread over both workers
            counts = {httpx.get(f"{url}/health").json()["sentences"] for _ in range(30)}
            assert counts == {before + 25}
    finally:
        code, _, err = _stop(proc)
    assert code == 0, err
