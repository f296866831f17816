"""One writer at a time, a swap that cannot lose the index, and `add` that knows what it added
(qtsearch.index.lock, qtsearch.indexing.append), on real indexes built with the tiny model that
conftest trains once per test run.

Concurrency is tested with real processes: a holder that takes the writer lock and waits (so
the timing is certain), and real `qtsearch add` / `build-index` / HTTP POST /add racing each
other (repeated, since who wins is a matter of timing). Kills are real SIGKILLs at named points
of the swap (the QTSEARCH_TEST_KILL_AT hook), or of the lock holder from outside.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_helpers import ENV, REPO, cli, one_error_line, sentences, whole

from qtsearch.core.errors import BusyError
from qtsearch.index.lock import KILL_ENV, lock_path, restore, swap_in, writer_lock

#: Takes the writer lock of argv[1], says so on stdout, and holds it until killed or stdin ends.
HOLDER = r"""
import sys
from qtsearch.index.lock import writer_lock
with writer_lock(sys.argv[1], "qtsearch add held-by-test"):
    print("held", flush=True)
    sys.stdin.read()
"""


def start_cli(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(REPO / "cli.py"), *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def hold(folder: Path) -> subprocess.Popen:
    """A process holding the writer lock of `folder` (once this returns)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=ENV)
    assert proc.stdout.readline().strip() == "held"
    return proc


@pytest.fixture
def copy(flat: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(flat, tmp_path / "index"))





# ---------------------------------------------------------------------------------------------
# The lock itself (fast: plain folders)


def test_lock_is_exclusive_and_names_its_holder(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    holder = hold(folder)
    try:
        with pytest.raises(BusyError) as e, writer_lock(folder):
            pass
        message = str(e.value)
        assert f"pid {holder.pid} (qtsearch add held-by-test, since " in message
        assert "--wait" in message and e.value.code == 7
        t0 = time.monotonic()
        with pytest.raises(BusyError), writer_lock(folder, wait=0.5):
            pass
        assert 0.4 < time.monotonic() - t0 < 5
    finally:
        holder.stdin.close()
        holder.wait(30)
    with writer_lock(folder):  # released when its holder ended
        assert json.loads(lock_path(folder).read_text())["pid"] == os.getpid()
    assert not lock_path(folder).exists()  # and the file goes with the last holder


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    holder = hold(folder)
    holder.kill()
    holder.wait(30)
    assert lock_path(folder).exists()  # the file stays behind, the OS lock does not
    with writer_lock(folder):
        pass
    assert not lock_path(folder).exists()


def test_a_waiting_writer_goes_on_when_the_holder_ends(tmp_path):
    folder = tmp_path / "idx"
    folder.mkdir()
    holder = hold(folder)
    told: list[str] = []
    with ThreadPoolExecutor(1) as pool:
        def waiter() -> float:
            with writer_lock(folder, wait=None, on_wait=told.append):
                return time.monotonic()
        got = pool.submit(waiter)
        time.sleep(0.5)
        assert not got.done()
        released = time.monotonic()
        holder.stdin.close()
        holder.wait(30)
        assert got.result(30) >= released
    assert told == [f"{folder}: waiting for pid {holder.pid} (qtsearch add held-by-test, "
                    f"since {told[0].split('since ')[1]}"]


def test_readers_never_take_the_lock(flat, tmp_path):
    from qtsearch.search.searcher import Searcher

    copy = Path(shutil.copytree(flat, tmp_path / "index"))
    holder = hold(copy)
    try:
        with Searcher.open(copy, device="cpu") as idx:
            assert idx.search(["Emma was happy."], 3)[0]
    finally:
        holder.stdin.close()
        holder.wait(30)


# ---------------------------------------------------------------------------------------------
# The swap (fast: plain folders, in-process, both ways of swapping)


def _folder(path: Path, text: str) -> Path:
    path.mkdir()
    (path / "manifest.json").write_text(text)
    return path


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_swap_replaces_the_folder_whole(exchange, tmp_path, monkeypatch):
    if not exchange:
        monkeypatch.setenv("QTSEARCH_NO_EXCHANGE", "1")
    out = _folder(tmp_path / "idx", "old")
    new = _folder(tmp_path / "idx.adding", "new")
    swap_in(new, out)
    assert (out / "manifest.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_restore_puts_the_old_index_back_or_drops_a_stale_one(tmp_path):
    out = tmp_path / "idx"
    _folder(tmp_path / "idx.old-123", "old")
    assert restore(out)  # killed between the renames: the old one comes back
    assert (out / "manifest.json").read_text() == "old"
    _folder(tmp_path / "idx.old-456", "older")
    assert not restore(out)  # killed after both renames: the leftover goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
    assert (out / "manifest.json").read_text() == "old"


# ---------------------------------------------------------------------------------------------
# Real writers against a held lock


@pytest.mark.slow
def test_add_and_build_refuse_a_held_index_in_one_line_or_wait(copy, tiny_model, shared_data,
                                                                tmp_path):
    more = sentences(shared_data, 0, 30, tmp_path, "more.txt")
    before = whole(copy)
    holder = hold(copy)
    try:
        for argv in (["add", str(copy), str(more), "-q"],
                     ["build-index", str(more), "--model", str(tiny_model), "--out", str(copy),
                      "--overwrite", "--index", "flat", "--device", "cpu", "-q"]):
            r = cli(*argv)
            assert r.returncode == 7, r.stderr
            line = one_error_line(r.stderr)
            assert f"{copy}: another writer is at work on this index: pid {holder.pid} " \
                   "(qtsearch add held-by-test, since" in line and "--wait" in line
            assert whole(copy) == before
        waiting = start_cli("add", str(copy), str(more), "-q", "--wait")
        time.sleep(4)
        assert waiting.poll() is None  # still waiting
    finally:
        holder.stdin.close()
        holder.wait(30)
    _, err = waiting.communicate(timeout=600)
    assert waiting.returncode == 0, err
    assert f"waiting for pid {holder.pid}" in err
    assert whole(copy) == before + 30


@pytest.mark.slow
def test_add_after_a_killed_writer_just_works(copy, shared_data, tmp_path):
    """kill -9 of a real `qtsearch add` mid-way: its lock goes with it; the next add runs."""
    more = sentences(shared_data, 0, 400, tmp_path, "more.txt")
    before = whole(copy)
    proc = start_cli("add", str(copy), str(more), "-q", "--batch-size", "8")
    deadline = time.monotonic() + 120
    while not (tmp_path / "index.adding").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert whole(copy) == before
    r = cli("add", str(copy), str(more), "-q")
    assert r.returncode == 0, r.stderr
    assert whole(copy) == before + 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "more.txt"]


# ---------------------------------------------------------------------------------------------
# Real writers racing each other (timing-dependent: repeated)


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_two_adds_at_once_never_break_the_index(round_, copy, shared_data, tmp_path):
    """Two `qtsearch add` started together: the one that finds the lock taken exits 7 with the
    holder's pid, the other adds; with --wait both add. Vectors, rows, full text and manifest
    always agree."""
    a = sentences(shared_data, 0, 50, tmp_path, "a.txt")
    b = sentences(shared_data, 50, 70, tmp_path, "b.txt")
    before = whole(copy)
    procs = [start_cli("add", str(copy), str(f), "-q") for f in (a, b)]
    results = [(p.wait(600), p.stderr.read()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, 7]), results
    added = sum(n for (code, _), n in zip(results, (50, 70), strict=True) if code == 0)
    for code, err in results:
        if code == 7:
            assert "another writer is at work on this index: pid" in one_error_line(err)
    assert whole(copy) == before + added
    procs = [start_cli("add", str(copy), str(f), "-q", "--wait", "--allow-duplicates")
             for f in (a, b)]
    assert [p.wait(600) for p in procs] == [0, 0], [p.stderr.read() for p in procs]
    assert whole(copy) == before + added + 120


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(2))
def test_two_builds_of_one_folder_at_once(round_, tiny_model, shared_data, tmp_path):
    a = sentences(shared_data, 0, 300, tmp_path, "a.txt")
    b = sentences(shared_data, 300, 200, tmp_path, "b.txt")
    out = tmp_path / "idx"
    procs = [start_cli("build-index", str(f), "--model", str(tiny_model), "--out", str(out),
                       "--index", "flat", "--device", "cpu", "--overwrite", "-q")
             for f in (a, b)]
    results = [(p.wait(600), p.stderr.read()) for p in procs]
    assert sorted(c for c, _ in results) in ([0, 0], [0, 7]), results
    assert whole(out) in (300, 200)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "idx"]


@pytest.mark.slow
def test_cli_add_and_http_add_at_once(copy, shared_data, tmp_path):
    """`qtsearch add` beside a server's POST /add: the server waits for the CLI's add (or the
    CLI is refused with exit 7); both adds that succeed are in the index, nothing else."""
    import httpx
    from serve_fixtures import TOKEN, serving, token_file

    more = sentences(shared_data, 0, 200, tmp_path, "more.txt")
    posted = sentences(shared_data, 200, 40, tmp_path, "posted.txt").read_text()
    before = whole(copy)
    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url,
                                                                timeout=300) as c:
        proc = start_cli("add", str(copy), str(more), "-q", "--batch-size", "16")
        deadline = time.monotonic() + 120
        while not lock_path(copy).exists() and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        r = c.post("/add", json={"text": posted},
                   headers={"Authorization": f"Bearer {TOKEN}"})
        code = proc.wait(600)
        err = proc.stderr.read()
        assert r.status_code == 200, r.text
        assert code in (0, 7), err
        expected = before + 40 + (200 if code == 0 else 0)
        assert c.get("/health").json()["sentences"] == expected
    assert whole(copy) == expected


def test_http_add_while_another_writer_holds_the_lock_is_503(copy, tmp_path, monkeypatch):
    import httpx
    from serve_fixtures import TOKEN, serving, token_file

    from qtsearch.app.serve import served

    monkeypatch.setattr(served, "ADD_WAIT_SECONDS", 0.3)
    holder = hold(copy)
    try:
        with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url,
                                                                    timeout=60) as c:
            r = c.post("/add", json={"text": "A sentence.\n"},
                       headers={"Authorization": f"Bearer {TOKEN}"})
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"]
    assert f"pid {holder.pid}" in r.json()["error"]


# ---------------------------------------------------------------------------------------------
# Kills inside the swap


@pytest.mark.slow
@pytest.mark.parametrize(("point", "exchange"), [("between-renames", False),
                                                  ("before-cleanup", False),
                                                  ("after-exchange", True)])
def test_add_killed_inside_the_swap_never_loses_the_index(point, exchange, copy, shared_data,
                                                           tmp_path):
    more = sentences(shared_data, 0, 25, tmp_path, "more.txt")
    before = whole(copy)
    env = {**ENV, KILL_ENV: point}
    if not exchange:
        env["QTSEARCH_NO_EXCHANGE"] = "1"
    r = cli("add", str(copy), str(more), "-q", env=env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    if point == "between-renames":
        assert not copy.exists()  # the one moment two renames leave nothing at the path
    # the next command, a reader, finds the old index or the new one
    r = cli("info", str(copy))
    assert r.returncode == 0, r.stderr
    n = whole(copy)
    assert n in (before, before + 25)
    r = cli("add", str(copy), str(more), "-q")
    assert r.returncode == 0, r.stderr
    assert whole(copy) == before + 25  # added exactly once, whichever index survived
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "more.txt"]


@pytest.mark.slow
def test_overwrite_killed_between_renames_keeps_a_whole_index(copy, tiny_model, shared_data,
                                                              tmp_path):
    other = sentences(shared_data, 0, 60, tmp_path, "other.txt")
    before = whole(copy)
    argv = ["build-index", str(other), "--model", str(tiny_model), "--out", str(copy),
            "--overwrite", "--index", "flat", "--device", "cpu", "-q"]
    r = cli(*argv, env={**ENV, KILL_ENV: "between-renames", "QTSEARCH_NO_EXCHANGE": "1"})
    assert r.returncode == -signal.SIGKILL, r.stderr
    assert not copy.exists()
    r = cli(*argv)  # the rerun restores the old index, then swaps in the finished new one
    assert r.returncode == 0, r.stderr
    assert whole(copy) == 60 != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index", "other.txt"]


# ---------------------------------------------------------------------------------------------
# Duplicates


@pytest.mark.slow
def test_add_skips_a_file_it_already_holds(copy, shared_data, tmp_path):
    more = sentences(shared_data, 0, 20, tmp_path, "more.txt")
    before = whole(copy)
    assert cli("add", str(copy), str(more), "-q").returncode == 0
    renamed = tmp_path / "same-text.txt"
    shutil.copy(more, renamed)
    r = cli("add", str(copy), str(renamed), "-q")
    assert r.returncode == 0, r.stderr
    assert "added 0 sentences" in r.stdout
    notes = [x for x in r.stderr.splitlines() if "skipped" in x]
    assert notes == [f"add: {renamed} skipped: the index already holds this file (sha256 "
                     f"{notes[0].split('sha256 ')[1].split('…')[0]}…, as {more}); "
                     "--allow-duplicates adds it again"]
    assert whole(copy) == before + 20
    r = cli("add", str(copy), str(renamed), "--allow-duplicates", "-q")
    assert r.returncode == 0, r.stderr
    assert whole(copy) == before + 40


def test_http_add_skips_a_text_it_already_holds(copy, tmp_path):
    import httpx
    from serve_fixtures import TOKEN, serving, token_file

    auth = {"Authorization": f"Bearer {TOKEN}"}
    text = "A sentence posted once.\nAnd its neighbour.\n"
    with serving(copy, token_file(tmp_path)) as url, httpx.Client(base_url=url,
                                                                timeout=120) as c:
        before = c.get("/health").json()["sentences"]
        first = c.post("/add", json={"text": text, "source": "notes.txt"}, headers=auth).json()
        again = c.post("/add", json={"text": text, "source": "other.txt"}, headers=auth).json()
        forced = c.post("/add", json={"text": text, "allow_duplicates": True},
                        headers=auth).json()
        after = c.get("/health").json()["sentences"]
    assert (first["added"], again["added"], forced["added"]) == (2, 0, 2)
    assert "other.txt skipped: the index already holds this file" in again["note"]
    assert after == before + 4 == whole(copy)
