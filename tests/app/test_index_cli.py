"""`qtsearch build-index / add / export / info` as a user runs them, including a real SIGKILL
in the middle of a build followed by a rerun that must end with the identical index."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_helpers import run

from qtsearch.app.cli import main
from qtsearch.index import open_faiss_index

CLI = Path(__file__).resolve().parents[2] / "cli.py"


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """~2,200 sentences of WikiText-2 running text."""
    text = (shared_data / "wikitext2" / "valid.txt").read_bytes()[:300_000]
    path = tmp_path_factory.mktemp("cli_corpus") / "wiki.txt"
    path.write_bytes(text[: text.rfind(b"\n") + 1])
    return path


def _rows(folder: Path) -> list[tuple]:
    conn = sqlite3.connect(folder / "meta.sqlite")
    rows = conn.execute("SELECT * FROM sentences ORDER BY id").fetchall()
    conn.close()
    return rows


def _vectors(folder: Path) -> np.ndarray:
    index = open_faiss_index(folder / "index.faiss")
    return index.reconstruct_n(0, index.ntotal)


def _stable(manifest: dict) -> dict:
    """The manifest without what legitimately differs between two runs (timings, time, the
    files' modification times, the checksums of config.json, which names the output folder,
    and of SQLite's file, whose header counts the transactions)."""
    files = {k: (v["bytes"], v["sha256"]) for k, v in manifest.get("files", {}).items()
             if k not in ("config.json", "meta.sqlite")}
    return {**{k: v for k, v in manifest.items() if k not in ("stages", "created")},
            "files": files}


@pytest.fixture(scope="module")
def built(corpus, tiny_model, tmp_path_factory):
    """One uninterrupted CLI build (flat, in-process) used as the reference."""
    out = tmp_path_factory.mktemp("cli") / "ref"
    with pytest.raises(SystemExit) as e:
        main(["build-index", str(corpus), "--model", str(tiny_model), "--out", str(out),
              "--split-sentences", "--index", "flat", "--shard-size", "100", "--parquet"])
    assert e.value.code == 0
    return out


def test_build_summary_and_info(built, corpus, tiny_model, tmp_path, capsys):
    code, out, _ = run(capsys, "info", str(built), "--json")
    assert code == 0
    info = json.loads(out)
    assert info["kind"] == "index" and info["index_type"] == "flat" and info["dim"] == 128
    assert info["count"] == len(_rows(built)) > 2000
    assert info["model"]["path"] == str(tiny_model.resolve())
    code, out, err = run(capsys, "build-index", str(corpus), "--model", str(tiny_model),
                         "--out", str(tmp_path / "x"), "--split-sentences", "--index", "sq8")
    assert code == 0, err
    assert "sentences indexed" in out and "metadata" in out and "total" in out
    assert "sq8" in err and "recall@10" in json.dumps(json.loads(
        (tmp_path / "x" / "manifest.json").read_text())["build"])


def test_default_out_folder(corpus, tiny_model, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "build-index", str(corpus), "--model", str(tiny_model), "-q")
    assert code == 0, err
    assert (tmp_path / "indexes" / "wiki" / "manifest.json").is_file()


def test_export_equals_sqlite(built, tmp_path, capsys):
    dest = tmp_path / "meta.parquet"
    code, out, _ = run(capsys, "export", str(built), str(dest))
    assert code == 0 and "rows" in out
    assert [tuple(r.values()) for r in pq.read_table(dest).to_pylist()] == _rows(built)
    assert [tuple(r.values()) for r in pq.read_table(built / "meta.parquet").to_pylist()] == \
        _rows(built)
    code, _, err = run(capsys, "export", str(built), str(dest))
    assert code == 6 and "already exists" in err


def test_add_via_cli(built, tmp_path, capsys):
    import shutil

    folder = tmp_path / "idx"
    shutil.copytree(built, folder)
    more = tmp_path / "more.txt"
    more.write_text("Brand new text. It has two sentences.\n", encoding="utf-8")
    n = len(_rows(folder))
    code, out, err = run(capsys, "add", str(folder), str(more), "--split-sentences", "-q")
    assert code == 0, err
    assert "added 2 sentences" in out
    assert len(_rows(folder)) == open_faiss_index(folder / "index.faiss").ntotal == n + 2
    assert not (tmp_path / "idx.adding").exists()


def test_bad_input_is_one_clear_line(built, corpus, tiny_model, tmp_path, capsys):
    binary = tmp_path / "blob.txt"
    binary.write_bytes(bytes(range(256)) * 64)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    corrupt = tmp_path / "model"
    corrupt.mkdir()
    (corrupt / "config.json").write_text("{not json")
    cases = [
        ([str(tmp_path / "missing.txt")], ["--model", str(tiny_model)], 3, "no such file"),
        ([str(empty)], ["--model", str(tiny_model)], 3, "empty"),
        ([str(binary)], ["--model", str(tiny_model)], 3, "binary"),
        ([str(corpus)], ["--model", str(tmp_path / "nomodel")], 4, "no such model folder"),
        ([str(corpus)], ["--model", str(corrupt)], 4, "corrupt model config"),
        ([str(corpus)], ["--model", str(tiny_model), "--index", "ivf-flat"], 2, "--index must be"),
    ]
    for i, (files, opts, code, msg) in enumerate(cases):
        got, _, err = run(capsys, "build-index", *files, *opts, "--out", str(tmp_path / f"o{i}"))
        assert got == code and msg in err, (files, opts, got, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not (tmp_path / f"o{i}").exists()
    before = {p.name: p.read_bytes() for p in built.iterdir() if p.is_file()}
    got, _, err = run(capsys, "build-index", str(corpus), "--model", str(tiny_model),
                      "--out", str(built))
    assert got == 6 and "already exists" in err
    assert {p.name: p.read_bytes() for p in built.iterdir() if p.is_file()} == before
    got, _, err = run(capsys, "info", str(tmp_path / "nowhere"))
    assert got != 0 and "Traceback" not in err
    got, _, err = run(capsys, "add", str(tmp_path / "nowhere"), str(corpus))
    assert got == 5 and "no such index folder" in err


def _embedded(partial: Path) -> list[int]:
    """Shards the build has recorded as embedded (state.json is replaced atomically)."""
    try:
        return json.loads((partial / "state.json").read_text())["embedded"]
    except (OSError, ValueError, KeyError):
        return []


@pytest.mark.slow
def test_kill_then_rerun_gives_identical_index(built, corpus, tiny_model, tmp_path, capsys):
    """SIGKILL the build once its first shard is embedded; the rerun resumes and ends with the
    same vectors, rows and manifest as the uninterrupted build."""
    out = tmp_path / "killed"
    partial = tmp_path / "killed.partial"
    args = [sys.executable, str(CLI), "build-index", str(corpus), "--model", str(tiny_model),
            "--out", str(out), "--split-sentences", "--index", "flat", "--shard-size", "100",
            "--parquet", "-q"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not _embedded(partial):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "first shard never appeared"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists() and partial.is_dir()  # no half index is visible
    state = json.loads((partial / "state.json").read_text())
    assert 0 < len(state["embedded"]) < state["read"]["shards"]

    code, _, err = run(capsys, *args[2:-1])  # the rerun, in-process (saves an import)
    assert code == 0, err
    assert "resuming" in err
    assert not partial.exists()
    assert np.array_equal(_vectors(out), _vectors(built))
    assert _rows(out) == _rows(built)
    assert pq.read_table(out / "meta.parquet").equals(pq.read_table(built / "meta.parquet"))
    ref = json.loads((built / "manifest.json").read_text())
    got = json.loads((out / "manifest.json").read_text())
    assert _stable(got) == _stable(ref)


def test_ctrl_c_in_any_command_ends_with_one_line(built, capsys, monkeypatch):
    """Typer turns a KeyboardInterrupt into a silent exit 130; the CLI still says why it
    stopped (commands with more to say, like build-index, say it themselves)."""
    from qtsearch.app.commands import index as index_commands

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(index_commands, "read_manifest", interrupted)
    code, _, err = run(capsys, "export", str(built), "x.parquet")
    assert code == 130
    assert err.strip() == "qtsearch: interrupted"
