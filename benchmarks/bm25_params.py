"""Would other BM25 parameters (k1, b) help the lexical leg, or the hybrid search it feeds?

The engine builds its BM25 files with Lucene's k1 = 1.2, b = 0.75 (`qtsearch.index.bm25`).
Each (k1, b) asked is tried on copies of the cached indexes that `qtsearch bench retrieval`
builds (the default model; BEIR development splits by document, nDCG@10; SQuAD's development
answer sentences, MRR@10, `--squad-questions` drawn at random) and on those of the paraphrase
tasks of `qtsearch bench relevance` (MRR@10, and their mean): the files store every
posting's term frequency and every row's length, so the copy's weights are recomputed with the
new k1 and b (`bm25.keep_rows` keeping every row, as `delete` does) and its manifest written
again, and the lexical and hybrid modes searched through `Index.search`. Nothing is built anew.

    python benchmarks/bm25_params.py --params 1.2,0.75 0.9,0.4 1.2,0.5 1.5,0.75 2.0,0.75
    python benchmarks/bm25_params.py --skip beir --params 1.2,0.75 0.9,0.4 0.9,0.3 0.6,0.3
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np

from qtsearch.core.paths import data_root
from qtsearch.evaluation.relevance.indexes import encoder_key, task_index
from qtsearch.evaluation.relevance.relevance_run import run_queries as run_relevance
from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks
from qtsearch.evaluation.retrieval import answer_retrieval, beir
from qtsearch.evaluation.retrieval.retrieval_run import collection_index
from qtsearch.evaluation.retrieval.retrieval_run import run_queries as run_retrieval
from qtsearch.index import bm25
from qtsearch.index.manifest import read_manifest, write_manifest
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.querying import query_encoder

MODES = ("lexical", "hybrid")


def reweighed(folder: Path, work: Path, k1: float, b: float) -> Path:
    """A copy of the index `folder` in `work` whose BM25 weights use k1 and b."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(folder, work)
    manifest = read_manifest(work, hash_changed=False)  # before its files change
    rows = bm25.Bm25Index.open(work)
    assert rows is not None, f"{folder}: no BM25 files"
    keep = np.ones(rows.count, dtype=bool)
    del rows  # its memory maps, before keep_rows replaces the files under them
    saved = bm25.K1, bm25.B
    bm25.K1, bm25.B = k1, b
    try:
        bm25.keep_rows(work, keep)
    finally:
        bm25.K1, bm25.B = saved
    write_manifest(work, manifest)  # every file's size and checksum recorded anew
    return work


def row(name: str, metric: str, k1: float, b: float, cells: list[float]) -> str:
    return (f"| {name} | {metric} | {k1:g} | {b:g} | " + " | ".join(f"{c:.4f}" for c in cells)
            + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", nargs="+", default=["1.2,0.75", "0.9,0.4", "1.2,0.5",
                                                         "1.5,0.75", "2.0,0.75"],
                        help="k1,b pairs to try")
    parser.add_argument("--squad-questions", type=int, default=3000)
    parser.add_argument("--skip", nargs="*", default=[], choices=["beir", "squad", "paraphrase"])
    args = parser.parse_args()
    grid = [tuple(float(x) for x in p.split(",")) for p in args.params]
    root = data_root()
    collections = [] if "beir" in args.skip else [beir.load(root / "beir" / "scifact", "train"),
                                                  beir.load(root / "beir" / "nfcorpus", "dev")]
    if "squad" not in args.skip:
        squad = answer_retrieval.load(root / "squad" / "train-v1.1.json.gz", "dev")
        drawn = random.Random(0).sample(sorted(squad.questions),
                                        min(args.squad_questions, len(squad.questions)))
        squad.questions = {q: squad.questions[q] for q in drawn}
        collections.append(squad)
    encoder = query_encoder(None, "cpu")
    print("| collection | metric | k1 | b | " + " | ".join(MODES) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(MODES))
    with tempfile.TemporaryDirectory(prefix="bm25-params-") as tmp:
        for coll in collections:
            folder, _ = collection_index(coll, None, encoder.name, encoder_key(encoder))
            metric = coll.metrics[0]
            for k1, b in grid:
                work = reweighed(folder, Path(tmp) / coll.name, k1, b)
                with Index.open(work, model=encoder, device="cpu") as index:
                    cells = [run_retrieval(index, coll, mode)[metric] for mode in MODES]
                print(row(f"{coll.name} {coll.split}", metric, k1, b, cells), flush=True)
        if "paraphrase" not in args.skip:
            tasks = load_tasks(RelevanceConfig(tasks=["paraphrase"]), root)
            means = {p: [0.0] * len(MODES) for p in grid}
            for task in tasks:
                folder, _ = task_index(task, None, encoder.name, encoder_key(encoder), "cpu")
                for k1, b in grid:
                    work = reweighed(folder, Path(tmp) / task.name, k1, b)
                    with Index.open(work, model=encoder, device="cpu") as index:
                        cells = [run_relevance(index, task, mode)["MRR@10"] for mode in MODES]
                    means[k1, b] = [m + c / len(tasks) for m, c in zip(means[k1, b], cells,
                                                                      strict=True)]
                    print(row(task.name, "MRR@10", k1, b, cells), flush=True)
            for (k1, b), cells in means.items():
                print(row("paraphrase mean", "MRR@10", k1, b, cells), flush=True)


if __name__ == "__main__":
    main()
