"""Failures told in one line with the documented exit code, on real indexes: a disk that fills
up while SQLite writes (exit 6, naming the file), damaged SQLite pages (exit 5; the server
answers 500 with the same message), POST /add or /delete on an index the server cannot write
(409 with the reason), a model whose metrics.jsonl is not UTF-8 (`info` works, one warning),
SIGTERM (the same message and resume path as Ctrl-C).

The full disk is a real tmpfs and the read-only index a real read-only bind mount, each in a
private mount namespace (`unshare -m`) so nothing outside the test sees them; where the
machine does not allow that (no root, no unshare), those tests are skipped with the reason.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cli_helpers import ENV, REPO, cli, no_mounts, one_error_line, sentences, whole
from serve_fixtures import TOKEN, serving, token_file

NO_MOUNTS = no_mounts()
needs_mounts = pytest.mark.skipif(NO_MOUNTS is not None, reason=str(NO_MOUNTS))


@pytest.fixture
def copy(flat: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(flat, tmp_path / "index"))


# ---------------------------------------------------------------------------------------------
# Disk full


@needs_mounts
@pytest.mark.slow
def test_disk_full_while_add_writes_sqlite_is_exit_6_naming_the_file(flat, shared_data,
                                                                     tmp_path):
    """A tmpfs with room for the index and its working copy and little more: `add` of 3,000
    sentences fills it while SQLite writes the rows."""
    size = sum(-(-f.stat().st_size // 4096) * 4096 for f in flat.rglob("*") if f.is_file())
    more = sentences(shared_data, 0, 3000, tmp_path, "more.txt")
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    script = (f"mount -t tmpfs -o size={2 * size + (256 << 10)} tmpfs {disk} && "
              f"cp -a {flat} {disk}/index && "
              f"{sys.executable} {REPO / 'cli.py'} add {disk}/index {more} -q; "
              f"echo exit=$? >&2; cp -r {disk} {kept}")
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       env=ENV, timeout=600)
    err, code = r.stderr.rsplit("exit=", 1)
    assert int(code) == 6, r.stderr
    line = one_error_line(err)
    assert line.startswith(f"qtsearch: error: {disk}/index.adding/meta.sqlite: no space left on "
                           "the device ("), line
    assert sorted(p.name for p in kept.iterdir()) == ["index"]  # the working copy is gone
    assert whole(kept / "index") == whole(flat)  # and the index is as it was


# ---------------------------------------------------------------------------------------------
# Damaged SQLite


def _damage(db: Path, seed: int) -> None:
    """Overwrite a few random runs of bytes after the first page (the schema stays readable,
    so the damage is met while answering)."""
    rng = random.Random(seed)
    data = bytearray(db.read_bytes())
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(4096, len(data) - 64)
        n = rng.randint(8, 4096)
        data[at:at + n] = rng.randbytes(min(n, len(data) - at))
    db.write_bytes(bytes(data))


def _zero_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[4096:] = bytes(len(data) - 4096)
    db.write_bytes(bytes(data))


@pytest.mark.slow
def test_damaged_sqlite_is_exit_5_in_one_line_never_a_traceback(copy):
    _zero_pages(copy / "meta.sqlite")
    for argv in (["search", str(copy), "Emma was happy.", "-k", "3"],
                 ["search", str(copy), "Emma was happy.", "--mode", "lexical"],
                 ["info", str(copy)]):
        r = cli(*argv)
        assert r.returncode == 5, (argv, r.stderr)
        line = one_error_line(r.stderr)
        assert str(copy / "meta.sqlite") in line and "rebuild the index" in line, line


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_randomly_damaged_sqlite_fails_clearly_or_answers(seed, copy):
    """Random damage may miss every page a search reads (exit 0); otherwise exit 5 with one
    line. Never exit 1, never a traceback, never SQL."""
    _damage(copy / "meta.sqlite", seed)
    r = cli("search", str(copy), "She was very happy to see him again.", "-k", "20")
    assert r.returncode in (0, 5), r.stderr
    assert "Traceback" not in r.stderr and "SELECT" not in r.stderr
    if r.returncode == 5:
        assert "rebuild the index" in one_error_line(r.stderr)


def test_server_answers_damaged_sqlite_with_500_and_the_message(copy, caplog):
    with serving(copy) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.get("/search", params={"q": "Emma was happy."}).status_code == 200
        _zero_pages(copy / "meta.sqlite")  # damaged under the running server
        r = c.get("/sentences/1500", params={"context": 2})
    assert r.status_code == 500, r.text
    assert r.json()["error"].startswith(f"{copy / 'meta.sqlite'}: damaged SQLite database (")
    assert "Traceback" not in caplog.text


# ---------------------------------------------------------------------------------------------
# /add on an index the server cannot write


@needs_mounts
@pytest.mark.slow
def test_add_on_a_read_only_index_is_409_with_the_reason(flat, tmp_path):
    """The server runs in a namespace where the index's folder is a read-only bind mount."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    index = Path(shutil.copytree(flat, shelf / "index"))
    token = token_file(tmp_path)
    with socket_port() as port:
        pass
    script = (f"mount --bind {shelf} {shelf} && mount -o remount,bind,ro {shelf} && "
              f"exec {sys.executable} {REPO / 'cli.py'} serve {index} --port {port} "
              f"--token-file {token}")
    proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.2)
        for path, body in (("/add", {"text": "A sentence to add.\n"}),
                           ("/delete", {"where": "doc=0"})):
            r = httpx.post(f"{url}{path}", json=body,
                           headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)
            assert r.status_code == 409, r.text
            assert r.json()["error"] == (f"{index}: cannot write beside this index (Read-only "
                                         "file system): it is read-only here")
        assert httpx.get(f"{url}/search", params={"q": "Emma"}, timeout=60).status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err


class socket_port:
    """A free loopback port (closed again, for a server process to bind)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# Non-UTF-8 metrics, SIGTERM


def test_info_on_a_model_whose_metrics_are_not_utf8(tiny_model, tmp_path):
    from qtsearch.app.cli import main

    model = Path(shutil.copytree(tiny_model, tmp_path / "model"))
    with open(model / "metrics.jsonl", "ab") as fh:
        fh.write(b'{"step": 99, "loss": 1.0, "note": "\xff\xfe"}\n\x80\x81\n')
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "info", str(model)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"qtsearch: WARNING: {model / 'metrics.jsonl'}: 2 lines skipped (not valid UTF-8)"]
    assert main  # the in-process entry point is the one the subprocess ran


@pytest.mark.slow
def test_sigterm_ends_a_build_as_ctrl_c_does(shared_data, tiny_model, tmp_path):
    """SIGTERM as the third shard is embedded: exit 130, the Ctrl-C line saying what is kept
    and what to run; that command then finishes the build."""
    from cli_helpers import KILLER

    corpus = sentences(shared_data, 0, 1000, tmp_path, "corpus.txt")
    out = tmp_path / "idx"
    argv = ["build-index", str(corpus), "--model", str(tiny_model), "--out", str(out),
            "--index", "flat", "--shard-size", "100", "--device", "cpu", "-q"]
    r = subprocess.run([sys.executable, "-c", KILLER, "qtsearch.indexing.shards:write_npy",
                        "after", "3", "", *argv], capture_output=True, text=True,
                       env={**ENV, "QT_TEST_SIGNAL": "SIGTERM"}, timeout=600)
    assert r.returncode == 130, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    count = int(last.split("interrupted; the ")[1].split(" sentences")[0].replace(",", ""))
    assert last == (
        f"qtsearch: error: interrupted; the {count:,} sentences read and 2 of {-(-count // 100)} "
        f"embedded shards are kept in {out}.partial: run the same command again to continue "
        "from there")
    r = cli(*argv)
    assert r.returncode == 0, r.stderr
    assert whole(out) == count


def test_sqlite_failures_are_recognised_by_sqlite_words_only(tmp_path):
    """A query's own SQLite error (an FTS5 syntax error) is not taken for damage."""
    from qtsearch.core.errors import DamagedIndex, OutputError
    from qtsearch.index.failures import sqlite_failure

    db = tmp_path / "x.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
    with pytest.raises(sqlite3.OperationalError) as e:
        conn.execute("SELECT * FROM t WHERE t MATCH 'AND OR'").fetchall()
    assert sqlite_failure(db, e.value) is None
    full = sqlite3.OperationalError("database or disk is full")
    assert isinstance(sqlite_failure(db, full), OutputError)
    bad = sqlite3.DatabaseError("database disk image is malformed")
    assert isinstance(sqlite_failure(db, bad), DamagedIndex)
    assert os.path.basename(str(db)) in str(sqlite_failure(db, bad))
