"""Nothing damaged is trusted: on an index whose files fail `check`, `add` and `delete` refuse
with exit 5 and one line naming the file, and write nothing (a writer records every file's
sha256 anew, so writing would make `check` call the damage whole); readers of damaged BM25
files and hand-edited manifests say so in one line, never a traceback.

One small real index is built with the CLI per module; each case damages a copy of it.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import ENV, REPO, cli, one_error_line, run, sentences

from qtsearch.core.errors import QTSearchError

#: The files of an index built with the default model (test_files_are_the_index_files keeps
#: this list in step with what a build writes).
FILES = ["index.faiss", "meta.sqlite", "config.json", "corpus_words.safetensors",
         "transform.json", "transform.safetensors", "bm25/indptr.npy", "bm25/info.json",
         "bm25/lengths.npy", "bm25/rows.npy", "bm25/term_offsets.npy", "bm25/terms.txt",
         "bm25/tfs.npy", "bm25/weights.npy"]
BM25 = [f for f in FILES if f.startswith("bm25/")]


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_at(path: Path, at: Callable[[int], int]) -> None:
    data = bytearray(path.read_bytes())
    data[at(len(data))] ^= 0x5A
    path.write_bytes(bytes(data))


def flip_100_bits(path: Path) -> None:
    rng = random.Random(path.name)
    data = bytearray(path.read_bytes())
    for _ in range(100):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncate": truncate,
    "flip-head": lambda p: flip_at(p, lambda n: 0),
    "flip-middle": lambda p: flip_at(p, lambda n: n // 2),
    "flip-tail": lambda p: flip_at(p, lambda n: n - 1),
    "100-bits": flip_100_bits}


def keeping_time(damage: Callable[[Path], None], path: Path) -> None:
    """`damage` done as a disk's bit rot does it: the file keeps its modification time, so
    only what the file holds can tell (the BM25 open checks, or `check`)."""
    st = path.stat()
    damage(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, emma_lines: Path, shared_data: Path):
    folder = tmp_path_factory.mktemp("damage")
    corpus = folder / "emma.txt"
    corpus.write_text("".join(itertools.islice(emma_lines.open(encoding="utf-8"), 300)),
                      encoding="utf-8")
    r = cli("build-index", str(corpus), "--out", str(folder / "index"), "--device", "cpu",
            "-q")
    assert r.returncode == 0, r.stderr
    return folder / "index", sentences(shared_data, 0, 30, folder, "more.txt")


@pytest.fixture
def copy(base, tmp_path: Path) -> Path:
    return Path(shutil.copytree(base[0], tmp_path / "index"))


def serve_open(index: Path) -> tuple[int, str, str]:
    """A server opening the index, as `run` reports a command: (exit code, "", error)."""
    from qtsearch.app.serve.app import ServeConfig, open_served

    try:
        open_served(ServeConfig(str(index), warm_up=True)).close()
    except QTSearchError as e:
        return e.code, "", f"qtsearch: error: {e}\n"
    return 0, "", ""


def command(name: str, index: Path, more: Path) -> list[str]:
    return {"add": ["add", str(index), str(more), "-q"],
            "delete": ["delete", str(index), "-w", "line=3"],
            "check": ["check", str(index)],
            "search": ["search", str(index), "Emma was happy at Hartfield.", "-k", "3"]}[name]


def test_files_are_the_index_files(base):
    assert sorted(json.loads((base[0] / "manifest.json").read_text())["files"]) == sorted(FILES)


@pytest.mark.parametrize("name", ["add", "delete"])
def test_writers_still_write_a_whole_index(capsys, base, copy, name):
    """The cases below refuse because of the damage, not because the commands fail."""
    code, _, err = run(capsys, *command(name, copy, base[1]))
    assert code == 0, err
    assert run(capsys, "check", str(copy))[0] == 0


@pytest.mark.parametrize("name", ["add", "delete", "check", "search", "serve"])
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("file", FILES)
def test_damage_is_refused_and_never_laundered(capsys, base, copy, file, damage, name):
    """Writers refuse and write nothing; readers (a search, a server opening the index) refuse
    rather than answer differently: the damage changed the file's modification time, so the
    open hashes it."""
    DAMAGE[damage](copy / file)
    before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()}
    code, _, err = (serve_open(copy) if name == "serve"
                    else run(capsys, *command(name, copy, base[1])))
    assert code == 5, err
    line = one_error_line(err)
    assert str(copy / file) in line, line
    assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file()} == before
    code, _, err = run(capsys, "check", str(copy))
    assert code == 5 and str(copy / file) in one_error_line(err)


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("file", BM25)
def test_damaged_bm25_files_are_one_line_for_readers(capsys, copy, file, damage):
    """Damage that kept the file's time, read by a search, lexical or hybrid, and a server
    opening the index: answered, or exit 5 in one line; never a traceback (exit 1). A damaged
    header, size or shape is always seen."""
    keeping_time(DAMAGE[damage], copy / file)
    codes = []
    for mode in ("lexical", "hybrid"):
        code, _, err = run(capsys, *command("search", copy, Path()), "--mode", mode)
        assert code in (0, 5), err
        if code == 5:
            assert "bm25" in one_error_line(err)
        codes.append(code)
    code, _, err = serve_open(copy)
    assert code in (0, 5) and (code == 0 or "bm25" in one_error_line(err))
    if damage == "truncate" or file in TABLES:
        assert codes == [5, 5]
    if damage != "truncate" and file in TABLES:  # seen by the BM25 open, not by a size
        r = serve_cli(copy)
        assert r.returncode == 5 and "bm25" in one_error_line(r.stderr)


#: The BM25 files whose damage an open always sees: the info and the two term tables.
TABLES = ("bm25/info.json", "bm25/indptr.npy", "bm25/term_offsets.npy")


def serve_cli(index: Path) -> subprocess.CompletedProcess:
    """`qtsearch serve INDEX` on a free loopback port: it should refuse before it serves (a
    server that starts is stopped by the timeout, failing the test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return subprocess.run([sys.executable, str(REPO / "cli.py"), "serve", str(index), "--port",
                           str(port)], capture_output=True, text=True, env=ENV, timeout=120)


# -- hand-edited manifests --------------------------------------------------------------

EDITS: dict[str, Callable[[dict], None]] = {
    "count a string": lambda m: m.update(count="300"),
    "count null": lambda m: m.update(count=None),
    "count negative": lambda m: m.update(count=-1),
    "count true": lambda m: m.update(count=True),
    "dim a string": lambda m: m.update(dim="256"),
    "model a string": lambda m: m.update(model="default"),
    "model path a number": lambda m: m["model"].update(path=1),
    "a files entry a string": lambda m: m["files"].update({"meta.sqlite": "whole"}),
    "files a list": lambda m: m.update(files=["meta.sqlite"]),
    "a file's bytes a string": lambda m: m["files"]["index.faiss"].update(bytes="1"),
    "corpus a string": lambda m: m.update(corpus="emma.txt"),
    "a corpus entry a number": lambda m: m.update(corpus=[1]),
    "index_params a list": lambda m: m.update(index_params=[]),
}


@pytest.mark.parametrize("name", ["add", "delete", "check", "search", "info"])
@pytest.mark.parametrize("edit", list(EDITS))
def test_hand_edited_manifests_are_one_clear_line(capsys, base, copy, edit, name):
    path = copy / "manifest.json"
    manifest = json.loads(path.read_text())
    EDITS[edit](manifest)
    path.write_text(json.dumps(manifest))
    argv = ["info", str(copy)] if name == "info" else command(name, copy, base[1])
    code, _, err = run(capsys, *argv)
    assert code == 5, err
    line = one_error_line(err)
    assert f"{path}: corrupt manifest" in line, line


def test_check_names_files_the_manifest_does_not_list(capsys, copy):
    (copy / "bm25" / "notes.txt").write_text("mine", encoding="utf-8")
    code, _, err = run(capsys, "check", str(copy))
    assert code == 5
    assert f"{copy / 'bm25' / 'notes.txt'}: not listed in the manifest" in one_error_line(err)
    code, _, err = run(capsys, "delete", str(copy), "-w", "line=3")
    assert code == 5 and "notes.txt: not listed" in one_error_line(err)
