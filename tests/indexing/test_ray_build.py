"""`build-index --engine ray` on a local Ray cluster of 2 workers started here, over real
Wikipedia shards: the same vectors, rows, index and search results as the local build; a Ray
build interrupted while embedding (a lost shard file too) and again while its workers fill the
index resumes to the identical index; index parts filled apart and merged equal one fill;
qtsearch never imports Ray unless asked; bad engine options are one-line errors."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import faiss
import numpy as np
import pytest

from qtsearch.app.cli import main
from qtsearch.core.errors import Interrupted, UsageError
from qtsearch.encoders.registry import load_encoder
from qtsearch.index import parts
from qtsearch.index.faiss_backend import FaissBuilder
from qtsearch.indexing import ray_engine
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.indexing.ray_engine import Pool, RayOptions, build_on
from qtsearch.indexing.state import BuildState
from qtsearch.search.searcher import Searcher
from qtsearch.text.reader import read_sentences

SHARDS = ["wikipedia/AA/wiki_00.gz", "wikipedia/AB/wiki_50.gz"]  # 14,422 sentences
QUERIES = ["The storm caused heavy damage along the coast.", "He was elected president.",
           "The album was released in 1998.", "The river flows into the sea."]


def config(shared_data: Path, out: Path, index: str) -> IndexConfig:
    """Shards of 2,000 sentences: 8 per build, 4 for each of the 2 workers."""
    return IndexConfig(corpus=[str(shared_data / s) for s in SHARDS], out=str(out), index=index,
                       device="cpu", shard_size=2000)


@pytest.fixture(scope="module")
def local(shared_data: Path, tmp_path_factory) -> dict[str, Path]:
    """The local engine's indexes, flat and IVF-PQ, of the same corpus."""
    root = tmp_path_factory.mktemp("local")
    return {kind: build_index(config(shared_data, root / kind, kind)).path
            for kind in ("flat", "ivf-pq")}


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs; workers on one thread each (this machine has 2 cores)."""
    ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})
    yield ray
    ray.shutdown()


def rows(index: Path) -> list[tuple]:
    with sqlite3.connect(index / "meta.sqlite") as db:
        return db.execute("SELECT * FROM sentences ORDER BY id").fetchall()


def hits(index: Path) -> list[list[tuple]]:
    with Searcher.open(index) as ix:
        return [[(h.id, h.score, h.text, h.title) for h in found]
                for mode in ("semantic", "hybrid") for found in ix.search(QUERIES, k=10, mode=mode)]


def assert_same_index(ray_index: Path, local_index: Path) -> None:
    """Identical faiss files (vectors, codes, ids, lists), rows and search results."""
    assert (ray_index / "index.faiss").read_bytes() == (local_index / "index.faiss").read_bytes()
    assert rows(ray_index) == rows(local_index)
    for name in ("terms.txt", "rows.npy", "weights.npy"):  # the same exact BM25 files
        ours, theirs = ray_index / "bm25" / name, local_index / "bm25" / name
        assert ours.read_bytes() == theirs.read_bytes()
    assert hits(ray_index) == hits(local_index)


def stop_embedding_after(shards: int, monkeypatch) -> None:
    """Interrupt the driver (as Ctrl-C would) once it has heard of `shards` embedded shards."""
    timed = BuildState.timed

    def stop(self, stage, start):
        timed(self, stage, start)
        if stage == "embed" and len(self["embedded"]) == shards:
            raise KeyboardInterrupt

    monkeypatch.setattr(BuildState, "timed", stop)


@pytest.mark.slow
def test_ray_build_equals_local_build(ray_cluster, local, shared_data, tmp_path, capsys):
    """Through the CLI, on the Ray cluster already running in this process."""
    with pytest.raises(SystemExit) as exit_:
        main(["build-index", *(str(shared_data / s) for s in SHARDS), "--out",
              str(tmp_path / "ray"), "--index", "flat", "--device", "cpu", "--shard-size", "2000",
              "--engine", "ray", "--workers", "2", "-q"])
    assert (exit_.value.code or 0) == 0, capsys.readouterr().err
    assert "14,422 sentences" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["build"]["engine"] == {"name": "ray", "workers": 2, "cpus_per_worker": 1.0,
                                           "gpus_per_worker": 0}
    assert_same_index(tmp_path / "ray", local["flat"])
    vectors = faiss.read_index(str(tmp_path / "ray" / "index.faiss")).reconstruct_n(0, 14_422)
    assert vectors.shape == (14_422, 256) and np.isfinite(vectors).all()


@pytest.mark.slow
def test_the_local_engine_finishes_an_interrupted_ray_build(ray_cluster, local, shared_data,
                                                            tmp_path, monkeypatch):
    cfg = config(shared_data, tmp_path / "index", "flat")
    stop_embedding_after(2, monkeypatch)
    with pytest.raises(Interrupted):
        build_on("ray", cfg, RayOptions(workers=2))
    monkeypatch.undo()
    result = build_on("local", cfg)
    assert any("embedded shards" in r for r in result.resumed)
    assert "engine" not in result.manifest["build"]
    assert_same_index(result.path, local["flat"])


@pytest.mark.slow
def test_interrupted_ray_build_resumes_to_the_identical_index(ray_cluster, local, shared_data,
                                                             tmp_path, monkeypatch):
    cfg = config(shared_data, tmp_path / "ray", "ivf-pq")
    shards = tmp_path / "ray.partial" / "shards"
    timed = BuildState.timed
    handed_out: list[list[int]] = []  # the shards the driver gives the workers, map by map
    over_shards = ray_engine._over_shards

    def spy(todo, **columns):
        handed_out.append(list(todo))
        return over_shards(todo, **columns)

    monkeypatch.setattr(ray_engine, "_over_shards", spy)
    stop_embedding_after(3, monkeypatch)
    with pytest.raises(Interrupted, match="run the same command again"):
        build_on("ray", cfg, RayOptions(workers=2))
    embedded = sorted(shards.glob("emb_?????.npy"))  # whole files (tmp files have other names)
    # the workers may finish every shard before the driver's interrupt lands (a mean model
    # embeds a shard in milliseconds); the lost shard below leaves work to resume either way
    assert handed_out == [list(range(8))] and 3 <= len(embedded) <= 8
    embedded[0].unlink()  # a shard lost with the machine that held it: redone
    kept = {int(p.stem[4:]) for p in embedded[1:]}
    monkeypatch.setattr(BuildState, "timed", timed)  # (the spy stays)

    def stop_before_merging(*args):  # every part filled, none merged yet
        raise KeyboardInterrupt

    merge = parts.merge_parts
    monkeypatch.setattr(parts, "merge_parts", stop_before_merging)
    with pytest.raises(Interrupted):
        build_on("ray", cfg, RayOptions(workers=2))
    redone = set(handed_out[1])  # (a shard still in flight at the interruption may be kept)
    assert int(embedded[0].stem[4:]) in redone and not redone & kept
    assert handed_out[2] == list(range(8)) and len(list(shards.glob("emb_?????.npy"))) == 8
    filled = sorted(shards.glob("part-*.faiss"))
    assert len(filled) == 8
    filled[-1].unlink()
    monkeypatch.setattr(parts, "merge_parts", merge)

    result = build_on("ray", cfg, RayOptions(workers=2))
    assert handed_out[3:] == [[7]]  # nothing left to embed; only the lost part refilled
    assert "read" in result.resumed
    assert_same_index(result.path, local["ivf-pq"])


def test_parts_filled_apart_and_merged_equal_one_fill(shared_data, tmp_path):
    """The autofaiss pattern on real vectors: train once, fill three parts with global ids,
    merge in order: byte for byte the index filled in one process (HNSW cannot be merged)."""
    texts = [s.text for _, s in zip(range(3000), read_sentences(
        [str(shared_data / SHARDS[0])]), strict=False)]
    x = load_encoder(None, device="cpu").encode(texts, normalize=True)
    for key in ("Flat", "SQ8", "IVF32,PQ32x4,Refine(SQfp16)", "IVF32,PQ32x4"):
        whole = FaissBuilder(key, x.shape[1])  # what a local build fills
        whole.train(x)
        trained = parts.write_trained(whole.index, tmp_path, key.encode())
        merged = faiss.clone_index(whole.index)  # as the Ray build does: trained, then merged
        pieces = [(0, 1100), (1100, 2000), (2000, 3000)]
        for i, (lo, hi) in enumerate(pieces):
            whole.add(x[lo:hi])
            parts.fill_part(trained, x[lo:hi], lo, parts.part_path(trained, i))
        parts.merge_parts(merged, (parts.part_path(trained, i) for i in range(3)))
        assert (faiss.serialize_index(merged).tobytes()
                == faiss.serialize_index(whole.index).tobytes()), key
    assert not parts.mergeable(faiss.index_factory(8, "HNSW32"))
    assert len(parts.stale_files(trained)) == 3 * 4  # the other keys' trained files and parts


def test_pool_fits_the_cluster():
    assert Pool.size(RayOptions(), {"CPU": 2.0}) == Pool(2, 1.0, 0.0)
    assert Pool.size(RayOptions(workers=4), {"CPU": 16.0}) == Pool(4, 4.0, 0.0)
    assert Pool.size(RayOptions(gpus_per_worker=1), {"CPU": 16.0, "GPU": 8.0}) == Pool(8, 2.0, 1)
    assert Pool.size(RayOptions(workers=4), {"CPU": 2.0}) == Pool(4, 0.5, 0.0)
    with pytest.raises(UsageError, match="has 0 GPUs"):
        Pool.size(RayOptions(gpus_per_worker=1), {"CPU": 2.0})
    with pytest.raises(UsageError, match="has 2"):
        Pool.size(RayOptions(workers=3, gpus_per_worker=1), {"CPU": 8.0, "GPU": 2.0})


def test_qtsearch_never_imports_ray_unless_asked():
    code = ("import sys, qtsearch.app.cli, qtsearch, qtsearch.indexing.ray_engine; "
            "print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("args, message", [
    (["--engine", "spark"], "--engine must be one of local, ray, not 'spark'"),
    (["--workers", "2"], "--address, --workers and --gpus-per-worker go with --engine ray"),
])
def test_engine_options_are_checked_in_one_line(capsys, shared_data, tmp_path, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(["build-index", str(shared_data / SHARDS[0]), "--out", str(tmp_path / "x"), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.strip() == f"qtsearch: error: {message}"
    assert not (tmp_path / "x.partial").exists()


def test_without_the_extra_the_ray_engine_says_what_to_install(monkeypatch, shared_data,
                                                               tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(UsageError, match=r"pip install 'qtsearch\[ray\]'"):
        build_on("ray", config(shared_data, tmp_path / "x", "flat"))
    assert not (tmp_path / "x.partial").exists()
