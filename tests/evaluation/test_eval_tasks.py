"""Evaluation tasks on the real data: each loads the right examples, splits them correctly and
scores within valid ranges; GloVe is clearly above chance on SUBJ, so a broken pipeline fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from qtsearch.core.errors import InputError, UsageError
from qtsearch.core.paths import data_root
from qtsearch.encoders.baselines import GloveBow
from qtsearch.encoders.registry import load_encoder
from qtsearch.evaluation import classifier
from qtsearch.evaluation.data_files import sample
from qtsearch.evaluation.harness import (
    EmbeddingCache,
    EvalConfig,
    evaluate,
    load_tasks,
    resolve_tasks,
    task_names,
)
from qtsearch.evaluation.tasks.next_sentence import NextSentence, ranks

SMALL_BOOK = "gutenberg/0744-ibsen-henrik--little-eyolf.txt.gz"  # held out, ~2k sentences

#: Full sizes: (split sizes, number of classes or None for scores).
SIZES = {
    "MR": ([10662], 2), "CR": ([3771], 2), "SUBJ": ([10000], 2), "MPQA": ([10603], 2),
    "TREC": ([5452, 500], 6), "SST2": ([6920, 872, 1821], 2),
    "MSRP": ([3576, 500, 1725], 2), "SICK-E": ([4500, 500, 4927], 3),
    "SICK-R": ([4500, 500, 4927], None), "STSB": ([5749, 1500], None),
}
STS_SIZES = {"STS12": 2358, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}


def split_sizes(task) -> tuple[list[int], list[np.ndarray]]:
    if hasattr(task, "data"):
        return [len(task.data.texts)], [task.data.labels]
    if hasattr(task, "train"):
        splits = [task.train, task.dev, task.test]
        return ([len(s.texts) for s in splits if s], [s.labels for s in splits if s])
    return [len(p.y) for p in task.splits], [p.y for p in task.splits]


@pytest.fixture(scope="module")
def full_tasks(shared_data: Path):
    """Every supervised and STS task, fully loaded (no encoding: a few seconds)."""
    config = EvalConfig(tasks=["classification", "pairs", "relatedness", "sts"],
                        data_dir=str(shared_data))
    return {t.name: t for t in load_tasks(config)}


def test_registry_names_and_groups():
    assert task_names() == ["MR", "CR", "SUBJ", "MPQA", "TREC", "SST2", "MSRP", "SICK-E",
                            "SICK-R", "STSB", "STS12", "STS13", "STS14", "STS15", "STS16",
                            "NextSent"]
    assert [t.name for t in resolve_tasks(["sts,mr"])] == ["MR", "STS12", "STS13", "STS14",
                                                          "STS15", "STS16"]
    assert [t.name for t in resolve_tasks(["sick-e", "SICK-E"])] == ["SICK-E"]
    with pytest.raises(UsageError, match="unknown task 'nope'"):
        resolve_tasks(["nope"])


@pytest.mark.parametrize("name", list(SIZES))
def test_full_task_loads_expected_examples(full_tasks, name):
    sizes, labels = split_sizes(full_tasks[name])
    want_sizes, classes = SIZES[name]
    assert sizes == want_sizes
    y = np.concatenate(labels)
    if classes is None:
        lo, hi = full_tasks[name].scale
        assert y.min() >= lo and y.max() <= hi and len(np.unique(y)) > 20
    else:
        assert sorted(np.unique(y)) == list(range(classes))
    texts = full_tasks[name].sentences()
    assert all(isinstance(t, str) and t.strip() for t in texts)


def test_full_task_label_balance(full_tasks):
    mr = full_tasks["MR"].data.labels
    assert np.bincount(mr).tolist() == [5331, 5331]
    assert np.bincount(full_tasks["SUBJ"].data.labels).tolist() == [5000, 5000]
    assert np.bincount(full_tasks["MSRP"].splits[2].y.astype(int)).tolist() == [578, 1147]


@pytest.mark.parametrize("name", list(STS_SIZES))
def test_sts_loads_only_scored_pairs(full_tasks, name):
    task = full_tasks[name]
    assert sum(len(p.y) for p in task.subsets.values()) == STS_SIZES[name]
    for p in task.subsets.values():
        assert len(p.a) == len(p.b) == len(p.y)
        assert p.y.min() >= 0 and p.y.max() <= 5


def test_sample_is_random_sorted_and_reproducible():
    a, b = sample(10_000, 300, seed=1), sample(10_000, 300, seed=1)
    assert np.array_equal(a, b) and np.all(np.diff(a) > 0) and a.max() > 5000
    assert len(sample(50, None, 0)) == 50 and len(sample(50, 80, 0)) == 50


def test_limit_slices_each_split(shared_data):
    tasks = {t.name: t for t in load_tasks(EvalConfig(tasks=["MR", "SST2", "SICK-E"],
                                                      data_dir=str(shared_data), limit=120))}
    assert split_sizes(tasks["MR"])[0] == [120]
    assert set(tasks["MR"].data.labels) == {0, 1}  # a random slice, not the (sorted) head
    assert split_sizes(tasks["SST2"])[0] == [120, 120, 120]
    assert split_sizes(tasks["SICK-E"])[0] == [120, 120, 120]


def test_missing_data_folder_is_input_error(tmp_path):
    with pytest.raises(InputError, match="data folder not found"):
        data_root(tmp_path / "absent")
    (tmp_path / "transfer").mkdir()
    with pytest.raises(InputError, match="task file not found"):
        load_tasks(EvalConfig(tasks=["MR"], data_dir=str(tmp_path)))


def test_kfold_folds_partition_and_score_range():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 100)
    X = rng.normal(size=(200, 5)) + y[:, None] * 2.0  # toy, linearly separable-ish
    acc, std = classifier.kfold_accuracy(X, y, folds=5, seed=0)
    assert 85 <= acc <= 100 and std >= 0
    X_noise = rng.normal(size=(200, 5))
    acc_noise, _ = classifier.kfold_accuracy(X_noise, y, folds=5, seed=0)
    assert acc_noise < 70  # no signal, no accuracy: the test folds are not leaking


def test_score_distribution_targets_have_the_right_mean():
    y = np.array([1.0, 2.5, 4.9, 5.0, 3.2])
    targets, classes = classifier.score_targets(y, 1, 5)
    assert classes.tolist() == [1, 2, 3, 4, 5]
    assert np.allclose(targets.sum(axis=1), 1.0) and targets.min() >= 0
    assert np.allclose(targets @ classes, y)
    assert ((targets > 0).sum(axis=1) <= 2).all()  # mass on floor(y) and floor(y)+1 only


def test_ranks_excludes_the_query_and_counts_ties_against_the_target():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.9, 0.1]], dtype=np.float32)
    q, t = np.array([0, 2]), np.array([1, 0])
    r = ranks(vectors[q], vectors, q, t)
    # query 0: row 1 ties with row 3 → rank 2; query 2: target 0 scores 0, rows 1 and 3 beat it
    assert r.tolist() == [2, 3]


@pytest.fixture(scope="module")
def tiny_runs(tiny_model, shared_data):
    """Every task on a slice, run once with the tiny trained model."""
    books = [str(shared_data / SMALL_BOOK)]
    config = EvalConfig(data_dir=str(shared_data), limit=150, books=books, queries=300,
                        folds=5, cache=False)
    return evaluate([load_encoder(tiny_model, device="cpu")], config)


def test_every_task_scores_within_valid_ranges(tiny_runs):
    results = tiny_runs.encoders[0].results
    assert list(results) == task_names()
    for name, metrics in results.items():
        for metric, value in metrics.items():
            assert np.isfinite(value), (name, metric)
            if metric.endswith(("acc", "f1", "top1", "top10")):
                assert 0 <= value <= 100, (name, metric, value)
            if metric.endswith(("pearson", "spearman")):
                assert -1 <= value <= 1, (name, metric, value)
    assert results["MR"]["n"] == 150 and results["SICK-E"]["n"] == 150
    assert results["STS16"]["n"] == 150 * 5  # five subsets, each sliced
    nxt = results["NextSent"]
    assert nxt["n"] == 150 and nxt["top1"] <= nxt["top10"]  # --limit caps the queries too
    assert 0 < nxt["mrr"] <= 1 and nxt["chance"] == pytest.approx(100 / (nxt["candidates"] - 1))
    assert "fg_top1" in nxt  # a QT model is also scored by f(query)·g(candidate)


def test_next_sentence_reads_held_out_books_by_default(shared_data):
    task = NextSentence(EvalConfig(queries=50))
    task.load(shared_data)
    assert len(task.books) == 18 and task.books[0].name.startswith("0740")
    assert task.books[-1].name.startswith("0757")
    assert len(task.pairs) == 50 and len(task.pool) > 30_000


def test_embedding_cache_encodes_each_text_once():
    cache = EmbeddingCache(GloveBow())
    a = cache(["the cat sat .", "a dog ran .", "the cat sat ."])
    assert np.array_equal(a[0], a[2])
    assert cache.missing(["a dog ran .", "new words here"]) == ["new words here"]
    b = cache(["new words here", "a dog ran ."])
    assert np.array_equal(b[1], a[1]) and len(cache._rows) == 3


def test_tasks_see_unit_vectors_and_the_store_keeps_the_raw_ones(tmp_path):
    """The engine searches L2-normalised vectors, so the tasks probe those (one protocol for
    every encoder); --raw-vectors probes the encoder's own output, and the disk cache serves
    both because it holds the raw vectors."""
    from qtsearch.encoders.mean import MeanEncoder
    from qtsearch.evaluation.vector_cache import VectorStore

    encoder = MeanEncoder()  # the shipped mean model: its raw vectors are not unit length
    texts = ["He did.", "The cat sat on the mat and looked at the bird outside the window."]
    raw = encoder.encode(texts)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    store = VectorStore(tmp_path)
    unit = EmbeddingCache(encoder, store=store)
    assert unit.prepare(texts) == "encoded"
    assert np.allclose(unit(texts), raw / np.linalg.norm(raw, axis=1, keepdims=True),
                       atol=1e-6)
    assert np.allclose(store.load(texts), raw, atol=1e-6)
    again = EmbeddingCache(encoder, store=store, unit=False)
    assert again.prepare(texts) == "disk"
    assert np.allclose(again(texts), raw, atol=1e-6)


def test_eval_records_which_vectors_it_probed(shared_data):
    """`unit_vectors` reaches the probes: on the same sample, SICK-R differs between the unit
    and the raw vectors of the shipped model, and the JSON config says which was used."""
    from qtsearch.encoders.mean import MeanEncoder

    figures = {}
    for unit in (True, False):
        config = EvalConfig(tasks=["SICK-R"], data_dir=str(shared_data), limit=300,
                            cache=False, unit_vectors=unit)
        run = evaluate([MeanEncoder()], config)
        assert run.to_json()["config"]["unit_vectors"] is unit
        figures[unit] = run.encoders[0].results["SICK-R"]["pearson"]
    assert figures[True] != pytest.approx(figures[False], abs=1e-4)


def test_glove_is_clearly_above_chance_on_subj(shared_data):
    config = EvalConfig(tasks=["SUBJ"], data_dir=str(shared_data), limit=1000)
    run = evaluate([GloveBow()], EvalConfig(**{**config.__dict__, "cache": False}))
    assert run.encoders[0].results["SUBJ"]["acc"] > 75  # chance 50; full data gives ~89
