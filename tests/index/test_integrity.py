"""Integrity you can check (qtsearch.index.integrity, `qtsearch check`) and an index another
user can read, on real indexes: the manifest records every file's size, sha256 and
modification time; every open refuses a file whose size is not the recorded one, and one
rewritten since (its time changed) whose sha256 is not; `check` finds what kept its time too,
and counts that disagree; files are written with the user's umask.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_helpers import ENV, REPO, cli, one_error_line


@pytest.fixture
def copy(flat: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(flat, tmp_path / "index"))


def _flip(path: Path, bits: int, seed: int = 0, skip: int = 64) -> None:
    """Flip `bits` random bits past the first `skip` bytes (the file's header)."""
    rng = random.Random(seed)
    data = bytearray(path.read_bytes())
    for _ in range(bits):
        at = rng.randrange(skip, len(data))
        data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def test_manifest_records_every_file(flat):
    manifest = json.loads((flat / "manifest.json").read_text())
    recorded = manifest["files"]
    on_disk = sorted(p.relative_to(flat).as_posix() for p in flat.rglob("*")
                     if p.is_file() and p.name != "manifest.json"
                     and not p.name.endswith(("-wal", "-shm")))  # SQLite's, when opened to write
    assert sorted(recorded) == on_disk
    for name, want in recorded.items():
        assert want["bytes"] == (flat / name).stat().st_size
        assert len(want["sha256"]) == 64


def test_check_says_ok_on_a_whole_index(copy):
    from qtsearch.app.cli import main

    with pytest.raises(SystemExit) as e:
        main(["check", str(copy)])
    assert e.value.code == 0


def test_check_counts_the_rows_the_bm25_files_cover(copy, capsys):
    """BM25 files of one row fewer (recorded as the index's own: not damage, a count that
    disagrees) are named by `check`, exit 5."""
    from qtsearch.app.cli import main
    from qtsearch.index import bm25
    from qtsearch.index.manifest import write_manifest

    conn = sqlite3.connect(copy / "meta.sqlite")
    rows = conn.execute("SELECT id, text FROM sentences ORDER BY id").fetchall()
    conn.close()
    bm25.build(copy, rows[:-1])
    write_manifest(copy, json.loads((copy / "manifest.json").read_text(encoding="utf-8")))
    with pytest.raises(SystemExit) as e:
        main(["check", str(copy)])
    assert e.value.code == 5
    assert f"bm25 rows {len(rows) - 1:,}, the manifest counts {len(rows):,}" in \
        capsys.readouterr().err


@pytest.mark.slow
def test_a_rewritten_file_is_refused_by_readers_and_named_by_check(copy):
    """100 flipped bits in a flat index.faiss keep its size; the rewrite changed its
    modification time, so an open hashes it and refuses (exit 5 naming it) instead of answering
    differently, and `check` names it too."""
    r = cli("check", str(copy))
    assert r.returncode == 0, r.stderr
    files = len(json.loads((copy / "manifest.json").read_text())["files"])
    assert r.stdout.strip() == (f"{copy}: ok: {files} files match their recorded sha256; "
                                "vectors = rows = bm25 rows = manifest count = 2,000")
    _flip(copy / "index.faiss", 100)
    for argv in (["search", str(copy), "Emma was happy."], ["info", str(copy)],
                 ["check", str(copy)]):
        r = cli(*argv)
        assert r.returncode == 5, (argv, r.stderr)
        line = one_error_line(r.stderr)
        assert f"{copy / 'index.faiss'}: sha256 " in line and "(damaged)" in line, line


def test_damage_that_keeps_the_time_is_seen_by_check_alone(copy):
    """What the times cannot see: a change whose modification time was set back (as a disk's
    own bit rot keeps it). Searches answer from it; `check`, which reads every byte, does not."""
    path = copy / "index.faiss"
    st = path.stat()
    _flip(path, 100)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cli("search", str(copy), "Emma was happy.").returncode == 0
    r = cli("check", str(copy))
    assert r.returncode == 5 and f"{path}: sha256 " in one_error_line(r.stderr)


def test_a_copy_without_its_times_is_hashed_at_open_until_check_records_them(flat, tmp_path):
    """`cp -r` gives every file a new modification time: opens hash the changed files (the
    answer is the same, with a note), `check` records the times, and later opens skip the hash.
    While a writer holds the index, `check` still says ok and notes that it recorded nothing."""
    from qtsearch.index.integrity import check_sizes
    from qtsearch.index.lock import writer_lock
    from qtsearch.index.manifest import Manifest

    copy = Path(shutil.copytree(flat, tmp_path / "plain", copy_function=shutil.copyfile))
    files = Manifest.read(flat).files
    assert set(check_sizes(copy, files)) == set(files)
    want = cli("search", str(flat), "Emma was happy.", "--json").stdout
    r = cli("search", str(copy), "Emma was happy.", "--json")
    assert r.returncode == 0 and r.stdout == want
    assert f"{len(files)} file(s) changed their modification time" in r.stderr
    with writer_lock(copy, "a test"):
        r = cli("check", str(copy))
    assert r.returncode == 0 and " ok: " in r.stdout, r.stderr
    assert f"could not record the times of {len(files)} file(s)" in r.stderr, r.stderr
    assert set(check_sizes(copy, files)) == set(files)
    r = cli("check", str(copy))
    assert r.returncode == 0 and " ok: " in r.stdout and not r.stderr, r.stderr
    assert check_sizes(copy, Manifest.read(copy).files) == []
    r = cli("search", str(copy), "Emma was happy.", "--json")
    assert r.returncode == 0 and r.stdout == want and "modification time" not in r.stderr


def test_every_writer_leaves_the_times_it_recorded(copy, shared_data, tmp_path):
    """Build, search, add, delete and an upsert each leave every file with the modification
    time its manifest records, or every later open would hash the index."""
    from cli_helpers import sentences

    from qtsearch.index.integrity import check_sizes
    from qtsearch.index.manifest import Manifest

    more = sentences(shared_data, 0, 20, tmp_path, "more.txt")
    steps = [["search", str(copy), "Emma was happy.", "--mode", "hybrid"],
             ["add", str(copy), str(more), "-q"],
             ["delete", str(copy), "-w", "line=3"],
             ["add", str(copy), str(more), "--upsert", "-q"]]
    for argv in [[], *steps]:
        if argv:
            r = cli(*argv)
            assert r.returncode == 0, (argv, r.stderr)
            assert "modification time" not in r.stderr, (argv, r.stderr)
        assert check_sizes(copy, Manifest.read(copy).files) == [], argv


@pytest.mark.slow
def test_check_finds_a_flipped_byte_in_the_transform_and_counts_that_disagree(copy):
    if not (copy / "transform.safetensors").exists():
        pytest.skip("this index has no fitted transform")
    _flip(copy / "transform.safetensors", 1, skip=200)
    conn = sqlite3.connect(copy / "meta.sqlite")
    conn.execute("DELETE FROM sentences WHERE id = 1999")
    conn.commit()
    conn.close()
    r = cli("check", str(copy))
    assert r.returncode == 5
    line = one_error_line(r.stderr)
    assert "transform.safetensors: sha256" in line
    assert "rows 1,999, the manifest counts 2,000" in line


@pytest.mark.slow
def test_every_open_refuses_a_file_of_the_wrong_size(copy):
    data = (copy / "index.faiss").read_bytes()
    (copy / "index.faiss").write_bytes(data + b"\0" * 16)
    for argv in (["search", str(copy), "Emma was happy."], ["info", str(copy)]):
        r = cli(*argv)
        assert r.returncode == 5, r.stderr
        line = one_error_line(r.stderr)
        assert f"{copy / 'index.faiss'}: {len(data) + 16:,} bytes where the manifest records " \
               f"{len(data):,}" in line


def test_files_are_written_with_the_users_umask(flat, tiny_model):
    """0644 under the default umask, safetensors files included (safetensors itself makes
    them 0600)."""
    mask = os.umask(0o022)
    os.umask(mask)
    want = 0o666 & ~mask
    for folder in (flat, tiny_model):
        for p in folder.rglob("*.safetensors"):
            if "checkpoint" not in p.parts:
                assert stat.S_IMODE(p.stat().st_mode) == want, p
    for p in flat.iterdir():
        if p.is_file():
            assert stat.S_IMODE(p.stat().st_mode) == want, p


def _other_user() -> int | None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    import pwd

    users = [u.pw_uid for u in pwd.getpwall() if 1000 <= u.pw_uid < 60000]
    return users[0] if users else None


@pytest.mark.slow
@pytest.mark.skipif(_other_user() is None, reason="no second user to read the index as "
                                                  "(needs root, setpriv and a uid ≥ 1000)")
def test_another_user_can_search_an_index(tiny_model, shared_data):
    """An index and its model built by one user (root here, umask 022) are searched by
    another (a uid ≥ 1000, through setpriv); a file that user may not read is named as such,
    not as damage."""
    uid = _other_user()
    shelf = Path(tempfile.mkdtemp(prefix="qtsearch-shared-"))
    try:
        shelf.chmod(0o755)
        model = Path(shutil.copytree(tiny_model, shelf / "model"))  # file modes kept
        for d in (model, *(p for p in model.rglob("*") if p.is_dir())):
            d.chmod(0o755)  # as mkdir makes them; pytest's own folders are 0700
        corpus = shelf / "corpus.txt"
        corpus.write_text("Emma was happy.\nThe weather was fine.\nA letter came today.\n",
                          encoding="utf-8")
        index = shelf / "index"
        r = subprocess.run([sys.executable, str(REPO / "cli.py"), "build-index", str(corpus),
                            "--model", str(model), "--out", str(index), "--index", "flat",
                            "--device", "cpu", "-q"], capture_output=True, text=True, env=ENV,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        home = shelf / "home"  # the other user's own (numba caches compiled code there)
        home.mkdir()
        os.chown(home, uid, uid)
        env = {k: v for k, v in ENV.items() if k not in ("HOME",)}
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            sys.executable, str(REPO / "cli.py"), "search", str(index),
                            "Emma was happy.", "-k", "1", "--json"],
                           capture_output=True, text=True, env={**env, "HOME": str(home)},
                           cwd=home, timeout=600)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)[0]["hits"][0]["text"] == "Emma was happy."
        (index / "index.faiss").chmod(0o600)  # a file the other user may not read
        r = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                            sys.executable, str(REPO / "cli.py"), "search", str(index),
                            "Emma was happy."], capture_output=True, text=True,
                           env={**env, "HOME": str(home)}, cwd=home, timeout=600)
        assert r.returncode == 5
        assert one_error_line(r.stderr) == (
            f"qtsearch: error: {index / 'index.faiss'}: permission denied (this user cannot "
            "read it; its owner can make it readable with chmod a+r)")  # not "corrupt"
    finally:
        shutil.rmtree(shelf, ignore_errors=True)
