"""`add` and `delete`, the writers that change an index in place, through the real command line
on real indexes (the shipped model, a few hundred Melville sentences): a disk that fills up at
any stage of their work, an index path that is a symbolic link, and read-only index folders.
Either the write is whole, or the index is left byte for byte as it was.

The indexes, the full-disk mounts and the way root is made to meet file modes are those of
test_paths_permissions, whose helpers and fixtures these tests share.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import test_paths_permissions as shared
from cli_helpers import ENV, REPO, cli, one_error_line, whole
from test_paths_permissions import beside, bound, needs_modes, needs_mounts

from qtsearch.index.lock import writer_lock

#: The same indexes as test_paths_permissions (pytest finds fixtures by these names).
corpus, built, more, index, linked = (shared.corpus, shared.built, shared.more, shared.index,
                                      shared.linked)

#: What each writer is asked to do (INDEX and MORE stand for the paths).
WRITES = {"add": ["add", "INDEX", "MORE", "-q"], "delete": ["delete", "INDEX", "--where", "line=1"]}


def argv_for(what: str, folder: Path | str, more_file: Path) -> list[str]:
    return [{"INDEX": str(folder), "MORE": str(more_file)}.get(a, a) for a in WRITES[what]]


def sums(folder: Path) -> dict[str, str]:
    """Every file of an index folder with its sha256: equal sums, the very same index."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def search(folder: Path | str, query: str, k: int = 5) -> list[tuple[int, str, float]]:
    r = cli("search", str(folder), query, "-k", str(k), "--json")
    assert r.returncode == 0, r.stderr
    return [(h["id"], h["text"], round(h["score"], 5)) for h in json.loads(r.stdout)[0]["hits"]]


def first_line(corpus_file: Path) -> str:
    return corpus_file.read_text(encoding="utf-8").splitlines()[0]


# ---------------------------------------------------------------------------------------------
# A full disk while adding or deleting: exit 6 naming the file, the index as it was

#: Room left on the disk beyond the index itself (KiB), from none (not even the lock file's
#: few bytes) up to room for the whole write. A writer copies the index and changes the copy,
#: so with this corpus and the shipped model the disk fills up in turn at the lock file, the
#: working copy, the metadata database (add), the BM25 files (add) and the faiss index.
ROOM_K = [0, 300, 600, 620, 640, 660, 680, 700, 760, 880, 1400]
QUERY = "the lawyer and his clerks"


@needs_mounts
@pytest.mark.slow
@pytest.mark.parametrize("what", ["add", "delete"])
def test_a_full_disk_while_writing_is_exit_6_and_leaves_the_index_as_it_was(
        index, more, tmp_path, what):
    disk = tmp_path / "disk"
    disk.mkdir()
    before, answers = sums(index), search(index, QUERY)
    argv = argv_for(what, disk / "idx", more)
    run = f"{sys.executable} {REPO / 'cli.py'}"
    script = "\n".join([
        "set -u",
        "one() {",
        f"  mount -t tmpfs -o size=64m tmpfs {disk} && cp -a {index} {disk}/idx &&",
        f"  used=$(df -k --output=used {disk} | tail -1) &&",
        f"  mount -o remount,size=$((used + $1))k {disk} || exit 99",
        f"  {run} {' '.join(argv)} >/dev/null 2>{tmp_path}/err; code=$?",
        "}",
        "failed=",
        f"for room in {' '.join(map(str, ROOM_K))}; do",
        "  one $room",
        f"  echo \"@@room=$room exit=$code\"; cat {tmp_path}/err",
        f"  echo @@beside; ls {disk}",
        f"  echo @@sums; (cd {disk}/idx && find . -type f | sort | xargs sha256sum)",
        "  [ $code -ne 0 ] && failed=$room",
        f"  umount {disk}",
        "done",
        # the fullest disk a write failed on: readers still find the index whole
        "[ -n \"$failed\" ] && one $failed && echo \"@@last=$failed exit=$code\" && "
        f"echo @@check && {run} check {disk}/idx 2>&1 && echo @@search && "
        f"{run} search {disk}/idx '{QUERY}' -k 5 --json 2>/dev/null; echo \"@@done=$?\"",
    ])
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       env=ENV, timeout=900)
    assert r.returncode == 0 and "@@done=0" in r.stdout, (r.stdout[-3000:], r.stderr[-3000:])
    runs, _, last = r.stdout.partition("@@last=")
    named, wrote = set(), []
    for part in runs.split("@@room=")[1:]:
        head, _, rest = part.partition("\n")
        room, code = (int(x.split("=")[-1]) for x in head.split())
        err, _, rest = rest.partition("@@beside\n")
        listed, _, listed_sums = rest.partition("@@sums\n")
        assert listed.split() == ["idx"], (room, listed)  # no work folder, no lock file left
        if code == 0:
            wrote.append(room)
            continue
        assert code == 6, (room, err)
        line = one_error_line(err)
        path = line.removeprefix("qtsearch: error: ").split(":")[0]
        assert path.startswith(f"{disk}/idx"), (room, line)  # the index's own file, or beside
        assert "no space left on the device" in line, (room, line)
        named.add(Path(path).name)
        after = {name.removeprefix("./"): digest for digest, name in
                 (x.split() for x in listed_sums.strip().splitlines())}
        assert after == before, (room, line)  # byte for byte the index it was
    assert wrote and wrote[-1] == ROOM_K[-1], wrote  # room enough: it writes
    stages = {"idx.lock", "idx.adding", "index.faiss"} | ({"meta.sqlite"} if what == "add"
                                                        else set())
    assert stages <= named, named
    checked, _, found = last.partition("@@check\n")[2].partition("@@search\n")
    assert "ok:" in checked, checked
    hits = json.loads(found.rpartition("@@done=")[0])[0]["hits"]
    assert [(h["id"], h["text"], round(h["score"], 5)) for h in hits] == answers


#: Writes a faiss index with `write_faiss_index` on a tmpfs one page too small for it: faiss
#: writes all but the last buffer at once and that one when it closes the file, where its
#: own writer only prints the failure. Prints the error, then what the disk holds.
LAST_BYTES = r"""
import subprocess, sys
from pathlib import Path
import faiss, numpy as np
from qtsearch.core.errors import OutputError
from qtsearch.index.faiss_backend import write_faiss_index
disk = Path(sys.argv[1])
index = faiss.IndexFlatIP(64)
index.add(np.ones((1000, 64), dtype="float32"))
pages = -(-len(faiss.serialize_index(index)) // 4096)
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={4 * (pages - 1)}k", "tmpfs", disk],
               check=True)
try:
    write_faiss_index(index, disk / "index.faiss")
except OutputError as e:
    print(e)
print(sorted(p.name for p in disk.iterdir()))
"""


@needs_mounts
def test_a_disk_that_fills_up_in_the_last_bytes_of_the_faiss_index_is_an_error(tmp_path):
    """Never a short index file taken for a written one (and swapped in by add or delete)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["unshare", "-m", sys.executable, "-c", LAST_BYTES, str(disk)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"{disk}/index.faiss: no space left on the device; free some and run the same command "
        "again", "[]"], r.stdout  # nothing under the name, no temporary file left


# ---------------------------------------------------------------------------------------------
# An index path that is a symbolic link: written through, the link stays a link


@pytest.mark.parametrize("what", ["add", "delete"])
def test_add_and_delete_through_a_symlink_change_the_folder_it_points_to(
        index, linked, corpus, more, what):
    gone = first_line(corpus)  # `line=1` of the corpus: what delete takes out
    new = more.read_text(encoding="utf-8").splitlines()[7]  # one of the sentences added
    query = new if what == "add" else gone
    assert (query in [t for _, t, _ in search(linked, query)]) == (what == "delete")
    r = cli(*argv_for(what, linked, more))
    assert r.returncode == 0, r.stderr
    assert linked.is_symlink() and linked.resolve() == index.resolve()
    assert Path(linked.parent / linked.readlink()).resolve() == index.resolve()
    assert whole(index) == (320 if what == "add" else 299)  # the folder got the change
    assert beside(linked) == ["link"] and beside(index) == ["idx"]  # no lock or copy left
    texts = [t for _, t, _ in search(linked, query)]
    if what == "add":  # a search through the link sees the new state
        assert texts[0] == new, texts
    else:
        assert gone not in texts, texts


@pytest.mark.parametrize("what", ["add", "delete"])
def test_add_and_delete_through_a_symlink_take_the_lock_of_the_folder(index, linked, more,
                                                                      what):
    before = sums(index)
    with writer_lock(index, "qtsearch add held-by-test"):  # taken by the folder's own path
        r = cli(*argv_for(what, linked, more))
    assert r.returncode == 7, r.stderr
    line = one_error_line(r.stderr)
    assert line.startswith(f"qtsearch: error: {index.resolve()}: ") and "held-by-test" in line
    assert sums(index) == before and beside(index) == ["idx"] and beside(linked) == ["link"]


# ---------------------------------------------------------------------------------------------
# Read-only index folders: exit 6 before any work, naming the folder, nothing changed


@needs_modes
@pytest.mark.parametrize("what", ["add", "delete"])
@pytest.mark.parametrize("where", ["folder", "through-link", "parent"])
def test_a_read_only_index_folder_is_refused_before_any_work(index, linked, more, what,
                                                              where):
    """The index folder read-only (named directly or through a link to it), or the folder
    that holds it (where the lock file and the working copy go)."""
    folder = index.parent if where == "parent" else index
    before = sums(index)
    folder.chmod(0o555)
    try:
        r = bound(*argv_for(what, linked if where == "through-link" else index, more))
        names = beside(index)
    finally:
        folder.chmod(0o755)
    assert r.returncode == 6, r.stderr
    line = one_error_line(r.stderr)
    assert line.startswith(f"qtsearch: error: {index}: "), line  # the folder, links resolved
    assert "read-only" in line and len(line) < 400, line
    assert "Traceback" not in r.stderr and "sentences" not in r.stdout
    assert names == ["idx"] and beside(linked) == ["link"]
    assert sums(index) == before
