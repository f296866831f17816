"""Crash safety: `train` and `build-index` killed with SIGKILL at chosen points, then resumed or
rerun, end exactly where an uninterrupted run ends; SQLite runs in WAL mode; a reader keeps a
replaced index working.

The kills are real SIGKILLs of a real `qtsearch` process. To hit a precise point (inside a
checkpoint write, between two renames) deterministically, the process runs the CLI through a
small driver that wraps one library function and kills its own process with SIGKILL on the
n-th call, before or after it. One kill is sent from outside instead, by polling for files, as
a user's `kill -9` would be.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_helpers import ENV, KILLER, REPO, killed_run, run_cli
from safetensors.numpy import load_file

from qtsearch.index import open_faiss_index

# ---------------------------------------------------------------------------------------------
# train


@pytest.fixture(scope="module")
def train_corpus(emma_lines: Path) -> Path:
    """900 sentences of Emma, one a line (conftest)."""
    return emma_lines


def train_argv(corpus: Path, out: Path) -> list[str]:
    return ["train", str(corpus), "--out", str(out), "--hidden", "16", "--word-dim", "16",
            "--vocab-size", "2000", "--batch-size", "64", "--max-steps", "12",
            "--checkpoint-every", "4", "--val-every", "4", "--precision", "fp32",
            "--device", "cpu", "-q"]


def _validation(folder: Path) -> list[dict]:
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if "val_accuracy" in r]


def assert_same_model(got: Path, ref: Path) -> None:
    a = load_file(str(got / "weights.safetensors"))
    b = load_file(str(ref / "weights.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert (got / "vocab.json").read_bytes() == (ref / "vocab.json").read_bytes()
    assert _validation(got) == _validation(ref)  # same held-out figures at the same steps


@pytest.fixture(scope="module")
def train_reference(train_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("crash_train_ref") / "model"
    code, _ = run_cli(*train_argv(train_corpus, out))
    assert code == 0
    return out


#: (name, wrapped function, before/after, n-th call, suffix of its first argument, then what)
TRAIN_KILLS = [
    # while tokenising, before any checkpoint: --resume has nothing; a plain rerun starts over
    ("tokenising", "qtsearch.text.token_corpus:tokenize", "after", 300, "", "rerun"),
    # between two checkpoints (qt_loss runs once per step and once per validation)
    ("mid-way", "qtsearch.encoders.nn.quick_thoughts:qt_loss", "before", 9, "", "resume"),
    # inside the 2nd checkpoint write: tensors written to checkpoint.tmp, state.json not yet
    ("checkpoint-write", "qtsearch.training.checkpoint:save_file", "after", 2, "", "resume"),
    # the 2nd checkpoint complete in checkpoint.tmp, the old one removed, the rename not done
    ("checkpoint-swap", "pathlib:Path.rename", "before", 2, "checkpoint.tmp", "resume"),
    # after the checkpoint, while the model files are refreshed (weights new, config not yet)
    ("model-files", "qtsearch.encoders.nn.folder:write_json_atomic", "before", 2, "config.json",
     "resume"),
]


@pytest.mark.parametrize(("name", "target", "when", "nth", "suffix", "then"), TRAIN_KILLS,
                         ids=[k[0] for k in TRAIN_KILLS])
@pytest.mark.slow
def test_train_killed_then_resumed_equals_uninterrupted(name, target, when, nth, suffix, then,
                                                        train_corpus, train_reference,
                                                        tmp_path):
    out = tmp_path / "model"
    argv = train_argv(train_corpus, out)
    killed_run(target, when, nth, argv, suffix)
    if then == "rerun":
        code, _ = run_cli(*argv, "--resume")
        assert code == 4  # no checkpoint yet: a clear refusal, nothing changed
        code, _ = run_cli(*argv)
    else:
        code, _ = run_cli(*argv, "--resume")
    assert code == 0
    assert_same_model(out, train_reference)


@pytest.mark.slow
def test_train_killed_from_outside_after_a_checkpoint(train_corpus, train_reference, tmp_path):
    """`kill -9` from another process once the first checkpoint exists, then --resume."""
    out = tmp_path / "model"
    argv = train_argv(train_corpus, out)
    proc = subprocess.Popen([sys.executable, str(REPO / "cli.py"), *argv], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not (out / "checkpoint" / "state.json").is_file():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if proc.returncode == 0:
        pytest.fail("the run finished before the kill; the corpus is too small to test this")
    code, _ = run_cli(*argv, "--resume")
    assert code == 0
    assert_same_model(out, train_reference)


# ---------------------------------------------------------------------------------------------
# build-index


@pytest.fixture(scope="module")
def index_corpus(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~1,000 sentences of WikiText-2 running text: ten shards of 100."""
    text = (shared_data / "wikitext2" / "valid.txt").read_bytes()[:140_000]
    path = tmp_path_factory.mktemp("crash_index") / "wiki.txt"
    path.write_bytes(text[: text.rfind(b"\n") + 1])
    return path


def index_argv(corpus: Path, model: Path, out: Path) -> list[str]:
    return ["build-index", str(corpus), "--model", str(model), "--out", str(out),
            "--split-sentences", "--index", "flat", "--shard-size", "100", "--parquet",
            "--device", "cpu", "--precision", "fp32", "-q"]


def _rows(folder: Path) -> list[tuple]:
    conn = sqlite3.connect(folder / "meta.sqlite")
    try:
        return conn.execute("SELECT * FROM sentences ORDER BY id").fetchall()
    finally:
        conn.close()


def _vectors(folder: Path) -> np.ndarray:
    index = open_faiss_index(folder / "index.faiss")
    return index.reconstruct_n(0, index.ntotal)


def _contents(folder: Path) -> dict[str, bytes]:
    """Every file under an index folder (its BM25 files are in a subfolder), by relative path."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_same_index(got: Path, ref: Path) -> None:
    assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in ref.iterdir())
    assert np.array_equal(_vectors(got), _vectors(ref))
    assert _rows(got) == _rows(ref)
    assert pq.read_table(got / "meta.parquet").equals(pq.read_table(ref / "meta.parquet"))
    stable = lambda m: {k: v for k, v in m.items()  # noqa: E731
                        if k not in ("stages", "created", "files")}
    mine, theirs = (json.loads((f / "manifest.json").read_text()) for f in (got, ref))
    assert stable(mine) == stable(theirs)
    # every file but these byte-identical, by its recorded size and sha256 (config.json names
    # the output folder; SQLite's file header counts the transactions that wrote the same rows)
    same = lambda m: {k: (v["bytes"], v["sha256"])  # noqa: E731
                      for k, v in m["files"].items() if k not in ("config.json", "meta.sqlite")}
    assert same(mine) == same(theirs)


@pytest.fixture(scope="module")
def index_reference(index_corpus, tiny_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("crash_index_ref") / "wiki"
    code, _ = run_cli(*index_argv(index_corpus, tiny_model, out))
    assert code == 0
    return out


INDEX_KILLS = [
    ("several-shards", "qtsearch.indexing.shards:write_npy", "after", 3, ""),
    ("index-written", "qtsearch.index.faiss_backend:write_faiss_index", "after", 1, ""),
    ("metadata-half", "qtsearch.index.store:MetadataStore.insert_many", "after", 4, ""),
    ("parquet-export", "qtsearch.index.store:MetadataStore.to_parquet", "before", 1, ""),
    ("cleanup", "shutil:rmtree", "before", 1, "shards"),
    ("before-rename", "qtsearch.indexing.pipeline:swap_in", "before", 1, ""),
]


@pytest.mark.parametrize(("name", "target", "when", "nth", "suffix"), INDEX_KILLS,
                         ids=[k[0] for k in INDEX_KILLS])
@pytest.mark.slow
def test_build_killed_then_rerun_equals_uninterrupted(name, target, when, nth, suffix,
                                                      index_corpus, tiny_model,
                                                      index_reference, tmp_path):
    out = tmp_path / "wiki"
    argv = index_argv(index_corpus, tiny_model, out)
    killed_run(target, when, nth, argv, suffix)
    assert not out.exists()  # nothing half-built is visible under the index's name
    code, _ = run_cli(*argv)
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wiki"]  # no leftovers
    assert_same_index(out, index_reference)


@pytest.mark.slow
def test_ctrl_c_says_what_is_kept_and_the_same_command_finishes_the_build(
        index_corpus, tiny_model, index_reference, tmp_path):
    """A real SIGINT as the third shard is embedded: exit 130 with one line saying what is
    kept and what to run; rerunning that command ends with the uninterrupted build's index."""
    out = tmp_path / "wiki"
    argv = index_argv(index_corpus, tiny_model, out)
    r = subprocess.run([sys.executable, "-c", KILLER, "qtsearch.indexing.shards:write_npy", "after",
                        "3", "", *argv], capture_output=True, text=True,
                       env={**ENV, "QT_TEST_SIGNAL": "SIGINT"}, timeout=600)
    assert r.returncode == 130, r.stderr[-2000:]
    count = json.loads((index_reference / "manifest.json").read_text())["count"]
    # the signal lands as the third shard's file is written, before the build records it
    assert r.stderr.strip().splitlines()[-1] == (
        f"qtsearch: error: interrupted; the {count:,} sentences read and 2 of 10 embedded shards "
        f"are kept in {out}.partial: run the same command again to continue from there")
    assert not out.exists()
    code, _ = run_cli(*argv)
    assert code == 0
    assert_same_index(out, index_reference)


@pytest.mark.slow
def test_ctrl_c_during_add_leaves_the_index_unchanged(index_corpus, tiny_model,
                                                      index_reference, tmp_path):
    import shutil

    folder = tmp_path / "wiki"
    shutil.copytree(index_reference, folder)
    before = _contents(folder)
    more = tmp_path / "more.txt"
    more.write_text("One more sentence to add.\nAnd another one.\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-c", KILLER,
                        "qtsearch.index.store:MetadataStore.insert_many",
                        "before", "1", "", "add", str(folder), str(more), "-q"],
                       capture_output=True, text=True, env={**ENV, "QT_TEST_SIGNAL": "SIGINT"},
                       timeout=600)
    assert r.returncode == 130, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last == f"qtsearch: error: interrupted; {folder} is unchanged"
    assert _contents(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["more.txt", "wiki"]


@pytest.mark.slow
def test_killed_overwrite_keeps_the_old_index_whole(index_corpus, tiny_model, index_reference,
                                                    tmp_path):
    """`build-index --overwrite` killed mid-way: the old index is still there, unchanged."""
    import shutil

    out = tmp_path / "wiki"
    shutil.copytree(index_reference, out)
    before = _contents(out)
    small = tmp_path / "small.txt"
    small.write_text("A different corpus.\nWith two lines.\n", encoding="utf-8")
    argv = [*index_argv(small, tiny_model, out), "--overwrite"]
    killed_run("qtsearch.index.faiss_backend:write_faiss_index", "after", 1, argv)
    assert _contents(out) == before


# ---------------------------------------------------------------------------------------------
# SQLite WAL, and readers of a replaced index


@pytest.mark.slow
def test_metadata_database_is_in_wal_mode(index_reference):
    conn = sqlite3.connect(index_reference / "meta.sqlite")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    # checkpointed at the end of the build: the database file alone is complete
    assert not (index_reference / "meta.sqlite-wal").exists() or \
        (index_reference / "meta.sqlite-wal").stat().st_size == 0


@pytest.mark.slow
def test_reader_of_a_replaced_index_keeps_its_answers(index_corpus, tiny_model,
                                                      index_reference, tmp_path):
    """A reader opened the index before `build-index --overwrite` replaced it: it goes on
    answering from the old index (same hits, in its own and in new threads); a new open sees
    the new index."""
    import shutil

    from qtsearch.search.searcher import Searcher

    folder = tmp_path / "wiki"
    shutil.copytree(index_reference, folder)
    queries = ["The album was released in the United States.",
               "The storm moved north along the coast."]
    old = Searcher.open(folder, device="cpu")
    before = [[h.to_dict() for h in hits] for hits in old.search(queries, 5)]

    other = tmp_path / "other.txt"
    other.write_text("Completely new sentences replace the index.\n"
                     "The storm moved north along the coast of a new land.\n"
                     "An album of another band.\n", encoding="utf-8")
    r = subprocess.run([sys.executable, str(REPO / "cli.py"),
                        *index_argv(other, tiny_model, folder), "--overwrite"],
                       capture_output=True, text=True, env=ENV, timeout=600)
    assert r.returncode == 0, r.stderr

    def answers() -> list[list[dict]]:
        return [[h.to_dict() for h in hits] for hits in old.search(queries, 5)]

    assert answers() == before
    in_thread: list = []
    t = threading.Thread(target=lambda: in_thread.append(answers()))
    t.start()
    t.join()
    assert in_thread == [before]
    assert [r.text for r in old.get([0, old.count - 1])] == \
        [before_row[1] for before_row in (_rows(index_reference)[0],
                                          _rows(index_reference)[-1])]
    old.close()

    with Searcher.open(folder, device="cpu") as new:
        assert new.count == 3
        assert new.get([0])[0].text == "Completely new sentences replace the index."
