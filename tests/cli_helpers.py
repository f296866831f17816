"""Running the command line from tests: in a child process (`cli`), in this process (`run`,
`run_cli`), or killed at a chosen point (`killed_run`); and what a whole index looks like."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from qtsearch.app.cli import main
from qtsearch.index import open_faiss_index

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "COLUMNS": "200"}


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *argv], capture_output=True,
                          text=True, env=env or ENV, timeout=600)


def counts(folder: Path) -> tuple[int, int, int, int]:
    """(vectors, rows, BM25 rows, manifest count): a whole index has four equal ones."""
    conn = sqlite3.connect(f"file:{folder / 'meta.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]
    finally:
        conn.close()
    lexical = json.loads((folder / "bm25" / "info.json").read_text())["rows"]
    manifest = json.loads((folder / "manifest.json").read_text())
    return open_faiss_index(folder / "index.faiss").ntotal, rows, lexical, manifest["count"]


def whole(folder: Path) -> int:
    c = counts(folder)
    assert len(set(c)) == 1, c
    return c[0]


def one_error_line(err: str) -> str:
    lines = [x for x in err.strip().splitlines() if x]
    assert len(lines) == 1 and lines[0].startswith("qtsearch: error: "), err
    assert "Traceback" not in err
    return lines[0]


def sentences(shared_data: Path, start: int, n: int, folder: Path, name: str) -> Path:
    """Real sentences the Austen test index does not hold (Melville), one a line."""
    import itertools

    from qtsearch.text.reader import read_sentences

    book = "gutenberg/0058-melville-herman--bartleby-the-scrivener-a-story-of-wall-street.txt.gz"
    got = read_sentences([str(shared_data / book)], split=True)
    path = folder / name
    path.write_text("\n".join(" ".join(s.text.split())
                              for s in itertools.islice(got, start, start + n)) + "\n",
                    encoding="utf-8")
    return path


def run(capsys, *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    try:
        main([*args])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


#: Runs the CLI (argv after the first five arguments) with MODULE:ATTR wrapped so that the
#: process SIGKILLs itself (or sends itself $QT_TEST_SIGNAL) before/after the n-th call whose
#: first argument's text ends with SUFFIX (an empty SUFFIX matches every call).
KILLER = r"""
import importlib, os, signal, sys
target, when, nth, suffix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
SIG = getattr(signal, os.environ.get("QT_TEST_SIGNAL", "SIGKILL"))
module, attr = target.split(":")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, name)
calls = 0
def wrapper(*args, **kwargs):
    global calls
    if not str(args[0] if args else "").endswith(suffix):
        return original(*args, **kwargs)
    calls += 1
    if when == "before" and calls == nth:
        os.kill(os.getpid(), SIG)
    result = original(*args, **kwargs)
    if when == "after" and calls == nth:
        os.kill(os.getpid(), SIG)
    return result
setattr(owner, name, wrapper)
from qtsearch.app.cli import main
main(sys.argv[5:])
"""


def killed_run(target: str, when: str, nth: int, argv: list[str], suffix: str = "") -> None:
    """Run `qtsearch argv` and check it died of SIGKILL at the chosen point."""
    r = subprocess.run([sys.executable, "-c", KILLER, target, when, str(nth), suffix, *argv],
                       capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == -signal.SIGKILL, (target, r.returncode, r.stderr[-2000:])


def run_cli(*argv: str) -> tuple[int, str]:
    """`qtsearch argv` in this process (the rerun; saves an interpreter start)."""
    try:
        main(list(argv))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    return code, ""


def fts_ids(folder: Path) -> list[int]:
    """The ids the full-text index holds (its own per-row table, not the content table)."""
    conn = sqlite3.connect(folder / "meta.sqlite")
    try:
        return [r[0] for r in conn.execute("SELECT id FROM sentences_fts_docsize ORDER BY id")]
    finally:
        conn.close()


def as_built(folder: Path) -> None:
    """Record a hand-edited index's files in its manifest, as the qtsearch that wrote such an
    index did: the edit stands for an older layout, not for damage (writers refuse damage)."""
    from qtsearch.index.manifest import write_manifest

    write_manifest(folder, json.loads((folder / "manifest.json").read_text(encoding="utf-8")))


def no_mounts() -> str | None:
    """Why private mounts (a tmpfs, a read-only bind mount in `unshare -m`) cannot be made
    here; None: they can."""
    if shutil.which("unshare") is None:
        return "no unshare command"
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"cannot mount in a private namespace: {r.stderr}"
