"""The mean-of-words encoder started from model2vec's word vectors (the default model's
architecture), multi-task runs that leave tasks out, and the NLI evaluation-overlap filter."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from qtsearch import load_encoder
from qtsearch.encoders.base import LEAD_TOKENS, TAIL_WEIGHT
from qtsearch.encoders.files import TABLE, read_metrics, read_tensors
from qtsearch.encoders.open_vocab import Float32Rows
from qtsearch.text.datasets.nli_data import NLIPair, read_nli
from qtsearch.text.datasets.paraphrase_data import drop_overlap, eval_sentences, normalise
from qtsearch.training.configs import MultitaskConfig
from qtsearch.training.multitask import train_multitask

pytest.importorskip("model2vec", reason="needs the [encoders] extra (CI installs it)")

REPO = Path(__file__).resolve().parents[2]
COCO = "pairs/coco/captions_val2017.json.gz"
SNLI = "nli/ketm/data/snli/test.txt"


def test_word_vectors_average_to_model2vecs_own_sentence_vector() -> None:
    """For words of one WordPiece each, the mean of the word vectors is exactly model2vec's
    (unnormalised) sentence vector: the table starts where model2vec is."""
    from model2vec import StaticModel

    from qtsearch.encoders.static import distilled_folder, word_vectors

    words = ["the", "cat", "sat", "on", "the", "mat"]
    rows, coverage = word_vectors([*words, "qzxvbnmwrt" * 3])
    assert rows.shape == (7, 256) and rows.dtype == np.float32
    assert coverage > 0.8  # the nonsense word still has WordPiece pieces
    model = StaticModel.from_pretrained(str(distilled_folder()), normalize=False)
    sentence = model.encode([" ".join(words)], use_multiprocessing=False)[0]
    np.testing.assert_allclose(rows[:6].mean(axis=0), sentence, rtol=2e-3, atol=2e-4)  # fp16


@pytest.fixture(scope="module")
def mean_model(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pairs-only multi-task run (no QT corpus, no NLI: tasks may be left out)."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("mean")
    config = MultitaskConfig(
        pairs=[str(shared_data / COCO)], data=str(shared_data), out=str(out), encoder="mean",
        word_vectors="model2vec", glove_words=0, train_words=4000, pairs_batch_size=64,
        max_steps=60, val_every=30, checkpoint_every=60, lr=1e-3)
    train_multitask(config)
    return out


def test_a_run_with_only_the_pairs_task_learns_it(mean_model: Path) -> None:
    tasks = {r["task"] for r in read_metrics(mean_model) if "task" in r}
    assert tasks == {"pairs"}
    vals = [r for r in read_metrics(mean_model) if "val_accuracy" in r]  # the first task's
    assert len(vals) == 3 and vals[-1]["val_accuracy"] > vals[0]["val_accuracy"]


def test_the_mean_model_encodes_the_mean_of_its_word_rows(mean_model: Path) -> None:
    enc = load_encoder(mean_model)
    table, = read_tensors(mean_model, [TABLE])  # the torch model's rows, read by numpy
    sentence = "A man rides a horse on the beach."
    ids = enc.token_ids(sentence)
    np.testing.assert_allclose(enc.encode([sentence])[0], table[ids].mean(axis=0),
                               rtol=1e-4, atol=1e-6)
    # lowercase words unknown as typed take another casing's row, never <unk>
    assert 1 not in enc.token_ids("A MAN rides")
    again = load_encoder(mean_model)
    batch = ["a dog runs", "two people sit at a table in a cafe", sentence] * 20
    assert np.array_equal(enc.encode(batch), again.encode(batch))


def test_rows_converted_once_are_the_rows_converted_each_time() -> None:
    rng = np.random.default_rng(0)
    stored = rng.standard_normal((5000, 16)).astype(np.float16)
    rows = Float32Rows(stored)
    for size in (1, 7, 300, 3000, 0, 300):  # new rows, rows met before, both, none
        ids = rng.integers(0, len(stored), size)
        taken = rows.take(ids)
        assert taken.dtype == np.float32 and np.array_equal(taken, stored[ids].astype(np.float32))
        taken[:] = 0  # a new array each time: the kept rows stay as they were
    assert np.array_equal(rows.take(np.arange(5000)), stored.astype(np.float32))
    assert np.array_equal(rows(), stored.astype(np.float32))
    assert np.array_equal(rows.take(np.array([3, 3, 1])), stored[[3, 3, 1]].astype(np.float32))


def test_a_long_row_is_read_whole_its_tail_weighing_less(mean_model: Path) -> None:
    enc = load_encoder(mean_model)
    table, = read_tensors(mean_model, [TABLE])
    opening = "A man rides a horse on the beach while two dogs run beside him. " * 5
    row = opening + "The children build a castle of sand near the water. " * 5
    ids = enc.token_ids(row)
    assert len(ids) > LEAD_TOKENS * 2  # read past the training length, not cut at it
    weights = np.where(np.arange(len(ids)) < LEAD_TOKENS, 1.0, TAIL_WEIGHT)
    expected = (table[ids] * weights[:, None]).sum(axis=0) / weights.sum()
    np.testing.assert_allclose(enc.encode([row])[0], expected, rtol=1e-4, atol=1e-6)
    # the words past the lead count: changing them changes the vector
    other = opening + "A storm breaks over the old harbour at night. " * 5
    assert not np.allclose(enc.encode([row])[0], enc.encode([other])[0])
    # a query (gathered) and a build (one sparse product) weigh a row alike
    batch = [row, "a dog runs", other] * 100
    np.testing.assert_allclose(enc.encode(batch)[:3], enc.encode(batch[:3]), atol=1e-5)


def test_nli_pairs_sharing_an_evaluation_sentence_are_dropped(shared_data: Path) -> None:
    held = eval_sentences(shared_data / "sts")
    pairs = read_nli([str(shared_data / SNLI)])
    kept, dropped = drop_overlap(pairs, held)
    assert dropped > 0 and len(kept) + dropped == len(pairs)
    assert not any(normalise(s) in held for p in kept for s in p.sentences())
    inside = next(iter(sorted(held, key=len)[len(held) // 2:]))
    assert drop_overlap([NLIPair(inside, "a b c", 0)], held) == ([], 1)


@pytest.mark.slow
def test_multitask_nli_counts_only_pairs_outside_the_evaluation_files(
        shared_data: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    base = dict(train=[str(shared_data / SNLI)], data=str(shared_data), hidden=16, fc_dim=32,
                glove_words=1000, max_steps=2, val_every=2, checkpoint_every=2)
    runs = []
    for flag in (True, False):
        out = tmp_path / str(flag)
        train_multitask(MultitaskConfig(out=str(out), eval_filter=flag, **base))
        runs.append(json.loads((out / "config.json").read_text())["train"])
    filtered, unfiltered = runs
    count = [r["train_pairs"] + r["valid_pairs"] + r["dropped_pairs"] for r in runs]
    assert filtered["nli_dropped_eval"] > 0 and "nli_dropped_eval" not in unfiltered
    assert count[0] + filtered["nli_dropped_eval"] == count[1] == len(
        read_nli([str(shared_data / SNLI)]))


def test_cli_refuses_a_run_with_no_task_in_one_line(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-multitask", "--out",
                        str(tmp_path / "m")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("qtsearch: error: give at least one task")
    bad = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-pairs", "x.csv", "--out",
                          str(tmp_path / "m"), "--encoder", "mean", "--word-dim", "8"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--word-dim" in bad.stderr and "Traceback" not in bad.stderr


def test_a_models_search_settings_choose_the_fit_and_the_bm25_weight(
        mean_model: Path, tmp_path: Path) -> None:
    """config.json "search" (written by train/ship_model.py) drives `--fit auto` and hybrid
    search's BM25 weight; a model without it gets the engine's defaults."""
    from qtsearch.indexing.pipeline import IndexConfig, build_index
    from qtsearch.search.fusion import LEXICAL_WEIGHT
    from qtsearch.search.searcher import Searcher

    tuned = tmp_path / "tuned"
    shutil.copytree(mean_model, tuned, ignore=shutil.ignore_patterns("checkpoint", "cache"))
    config = json.loads((tuned / "config.json").read_text())
    config["search"] = {"fit": "center", "lexical_weight": 0.3}
    (tuned / "config.json").write_text(json.dumps(config))
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"A man number {i} rides a horse along the beach.\n"
                              for i in range(40)) + "Two dogs play in the snow.\n")
    fits = {}
    for model in (tuned, mean_model):
        out = tmp_path / f"index-{model.name}"
        build_index(IndexConfig(corpus=[str(corpus)], model=str(model), out=str(out)))
        with Searcher.open(out, device="cpu") as index:
            fits[model] = (index.manifest.transform["spec"], index.settings.lexical_weight)
    assert fits[tuned] == ("centre", 0.3)
    spec, weight = fits[mean_model]  # whiten:768, cut to what 41 sentences can fit
    assert spec.startswith("whiten:") and weight == LEXICAL_WEIGHT
