"""Paths, permissions and full disks, through the real command line on real indexes (the
shipped model, a few hundred Melville sentences): an index folder reached through a symbolic
link, read-only index files and folders, corpus files and folders that cannot be read, a disk
that fills up at any stage of a build, and a build killed after its swap and run again.

Tests run as root here, and root ignores permission bits; so the commands that must meet
them run without the two capabilities that let root do so (`setpriv --bounding-set
-dac_override,-dac_read_search`): still root, but refused as any user would be. A non-root
run needs nothing of the kind. Full disks are real tmpfs mounts in a private mount namespace
(`unshare -m`). Where the machine allows neither, those tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ENV, REPO, cli, killed_run, no_mounts, one_error_line, sentences, whole

from qtsearch.index.lock import writer_lock
from qtsearch.index.manifest import read_manifest

NO_MOUNTS = no_mounts()
needs_mounts = pytest.mark.skipif(NO_MOUNTS is not None, reason=str(NO_MOUNTS))

#: Root, less the capabilities that override file modes.
UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


def _unprivileged() -> tuple[list[str], str | None]:
    """The command prefix that makes permission bits count for this test run, and why it
    cannot be had (None: it can)."""
    if os.geteuid() != 0:
        return [], None
    if shutil.which("setpriv") is None:
        return [], "running as root without setpriv: root reads and writes any file"
    r = subprocess.run([*UNPRIVILEGED, "cat", "/proc/self/status"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        return [], f"cannot drop root's file-mode override: {r.stderr.strip()}"
    return UNPRIVILEGED, None


PREFIX, NO_MODES = _unprivileged()
needs_modes = pytest.mark.skipif(NO_MODES is not None, reason=str(NO_MODES))


def bound(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`qtsearch argv` with file modes enforced (as any user but root meets them)."""
    return subprocess.run([*PREFIX, sys.executable, str(REPO / "cli.py"), *argv],
                          capture_output=True, text=True, env=ENV, cwd=cwd, timeout=600)


def build_argv(corpus: Path, out: Path | str, *more: str) -> list[str]:
    return ["build-index", str(corpus), "--out", str(out), "--index", "flat", "--device",
            "cpu", "-q", *more]


@pytest.fixture(scope="module")
def corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sentences(shared_data, 0, 300, tmp_path_factory.mktemp("pp_corpus"), "corpus.txt")


@pytest.fixture(scope="module")
def built(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of `corpus` with the shipped model, built once; tests copy it."""
    out = tmp_path_factory.mktemp("pp_index") / "idx"
    r = cli(*build_argv(corpus, out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def more(shared_data: Path, tmp_path: Path) -> Path:
    return sentences(shared_data, 300, 20, tmp_path, "more.txt")


@pytest.fixture
def index(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "shelf" / "idx"))


def beside(folder: Path) -> list[str]:
    """What the folder holding `folder` holds: no work folder, lock or link may be left."""
    return sorted(p.name for p in folder.parent.iterdir())


# ---------------------------------------------------------------------------------------------
# An index folder reached through a symbolic link


@pytest.fixture
def linked(index: Path, tmp_path: Path) -> Path:
    """`tmp/sym/link` → `tmp/shelf/idx`."""
    (tmp_path / "sym").mkdir()
    link = tmp_path / "sym" / "link"
    link.symlink_to(Path("..") / "shelf" / "idx")
    return link


def test_add_through_a_symlink_writes_the_folder_and_keeps_the_link(index, linked, more):
    before = whole(index)
    r = cli("add", str(linked), str(more), "-q")
    assert r.returncode == 0, r.stderr
    assert linked.is_symlink() and linked.resolve() == index.resolve()
    assert whole(index) == before + 20  # the folder the link points to got the rows
    assert beside(linked) == ["link"] and beside(index) == ["idx"]  # nothing left behind


def test_build_overwrite_through_a_symlink_replaces_the_folder_it_points_to(
        index, linked, corpus):
    r = cli(*build_argv(corpus, linked, "--overwrite", "--fit", "none"))
    assert r.returncode == 0, r.stderr
    assert linked.is_symlink() and whole(linked) == whole(index) == 300
    assert read_manifest(index)["transform"] is None  # the new index, built without a fit
    assert beside(linked) == ["link"] and beside(index) == ["idx"]
    r = cli(*build_argv(corpus, linked, "--fit", "none"))  # the next run finds it built
    assert r.returncode == 0, r.stderr


def test_writers_through_a_link_and_through_its_folder_share_one_lock(index, linked, more):
    with writer_lock(index, "qtsearch add held-by-test"):
        r = cli("add", str(linked), str(more), "-q")
    assert r.returncode == 7, r.stderr
    assert "held-by-test" in one_error_line(r.stderr)


# ---------------------------------------------------------------------------------------------
# Modes


def test_files_follow_any_umask_safetensors_included(corpus, tmp_path):
    """safetensors makes its files 0600 whatever the umask; every file of an index (the
    fitted transform and the corpus words of the shipped model included) takes the user's."""
    for mask in (0o027, 0o077):  # SQLite's own mode (0644) is the most it gives
        out = tmp_path / f"idx{mask:o}"
        script = f"umask {mask:o} && exec {sys.executable} {REPO / 'cli.py'} " + \
            " ".join(build_argv(corpus, out))
        r = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=ENV,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        files = [p for p in out.rglob("*") if p.is_file()]
        assert {"corpus_words.safetensors", "transform.safetensors"} <= {p.name for p in files}
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~mask, (oct(mask), p)


# ---------------------------------------------------------------------------------------------
# Read-only indexes: one line naming what is read-only, exit 6, nothing left behind


def _read_only_files(index: Path) -> None:
    for p in index.rglob("*"):
        p.chmod(p.stat().st_mode & ~0o222)


@needs_modes
@pytest.mark.parametrize("what", ["files", "folder"])
def test_writers_refuse_a_read_only_index_in_one_line(index, more, corpus, what):
    if what == "files":
        _read_only_files(index)  # the bm25 folder inside included, as `chmod -R a-w` does
    else:
        index.chmod(0o555)
    before = whole(index)
    try:
        for argv in (["add", str(index), str(more), "-q"],
                     ["delete", str(index), "--where", "line=1"],
                     build_argv(corpus, index, "--overwrite", "--fit", "none")):
            r = bound(*argv)
            assert r.returncode == 6, (argv, r.stderr)
            line = one_error_line(r.stderr)
            assert "read-only" in line and f"chmod -R u+w {index}" in line, line
            assert len(line) < 400, line  # never SQL with the user's rows
            named = line.removeprefix("qtsearch: error: ").split(":")[0]
            assert named.startswith(str(index)), line  # the read-only part of the index
            assert beside(index) == ["idx"], (argv, beside(index))
        assert whole(index) == before
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(index)], check=True)


@needs_modes
def test_a_read_only_work_folder_left_by_a_failed_add_is_cleared(index, more):
    """An earlier qtsearch copied a read-only index into `idx.adding` and failed there: the
    next writer removes that copy (read-only folders inside it too) and does its work."""
    work = Path(shutil.copytree(index, index.with_name("idx.adding")))
    _read_only_files(work)
    work.chmod(0o555)
    r = bound("add", str(index), str(more), "-q")
    assert r.returncode == 0, r.stderr
    assert beside(index) == ["idx"]
    assert whole(index) == 320


# ---------------------------------------------------------------------------------------------
# Corpus files and folders that cannot be read: input errors (exit 3) naming them


@needs_modes
@pytest.mark.parametrize("what", ["file", "folder"])
def test_an_unreadable_part_of_the_corpus_is_exit_3_naming_it(index, more, tmp_path, what):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(more, folder / "a.txt")
    hidden = folder / "sub" / "b.txt"
    shutil.copy(more, hidden)
    if what == "folder":
        hidden = hidden.parent
    hidden.chmod(0)
    before = whole(index)
    try:
        for argv in (build_argv(folder, tmp_path / "new"), ["add", str(index), str(folder)]):
            r = bound(*argv)
            assert r.returncode == 3, (argv, r.stderr)
            line = one_error_line(r.stderr)
            assert f"{hidden}: cannot " in line and "permission denied" in line, line
        assert not (tmp_path / "new").exists() and whole(index) == before
        assert beside(index) == ["idx"]
    finally:
        hidden.chmod(0o755)


# ---------------------------------------------------------------------------------------------
# A full disk at every stage of a build: exit 6, naming the file, "no space left on the device"

#: tmpfs sizes: from room for nothing up to room for the whole build. On this corpus with the
#: shipped model they fill up in turn while writing a row shard, the corpus words
#: (safetensors), an embedded shard (numpy), the faiss index and the SQLite database.
SIZES_K = [8, 48, 96, 200, 360, 440, 600, 760, 900, 4096]


@needs_mounts
@pytest.mark.slow
def test_a_full_disk_anywhere_in_a_build_is_exit_6_naming_the_file(corpus, tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    run = f"{sys.executable} {REPO / 'cli.py'} " + " ".join(build_argv(corpus, disk / "idx"))
    script = "; ".join(f"mount -t tmpfs -o size={k}k tmpfs {disk} && echo '@@{k}' >&2 && "
                       f"{run}; echo \"@@exit=$?\" >&2; umount {disk}" for k in SIZES_K)
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       env=ENV, timeout=600)
    runs = r.stderr.split("@@")[1:]
    assert len(runs) == 2 * len(SIZES_K), r.stderr[-3000:]
    named, built = set(), []
    for size, (err, code) in zip(SIZES_K, zip(runs[::2], runs[1::2], strict=True),
                                 strict=True):
        err = err.removeprefix(f"{size}\n")
        code = int(code.removeprefix("exit=").strip())
        if code == 0:
            built.append(size)
            continue
        assert code == 6, (size, err)
        line = one_error_line(err)
        path = line.removeprefix("qtsearch: error: ").split(":")[0]
        assert path.startswith(f"{disk}/idx.partial/"), (size, line)
        assert "no space left on the device" in line, (size, line)
        named.add(Path(path).name)
    assert built and built[-1] == SIZES_K[-1], built  # room enough: it builds
    assert len(named) >= 4 and {"index.faiss", "meta.sqlite"} <= named, named


# ---------------------------------------------------------------------------------------------
# A build killed after its swap, run again


@pytest.mark.parametrize(("target", "when"), [
    ("qtsearch.indexing.pipeline:swap_in", "after"),  # state.json still in the new index
    ("qtsearch.indexing.pipeline:folder_bytes", "before"),  # all done but the exit
], ids=["after-swap", "before-exit"])
def test_rerun_after_a_kill_past_the_swap_says_it_is_built(corpus, tmp_path, target, when):
    out = tmp_path / "idx"
    argv = build_argv(corpus, out)
    killed_run(target, when, 1, argv)
    r = cli(*argv)
    assert r.returncode == 0, r.stderr
    assert "already built from the same corpus files, model and options" in r.stderr
    assert not (out / "state.json").exists() and whole(out) == 300
    assert beside(out) == ["idx"]
    r = cli(*build_argv(corpus, out, "--fit", "none"))  # other options: it is another index
    assert r.returncode == 6 and "already exists" in one_error_line(r.stderr)
