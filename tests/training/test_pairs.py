"""The pairs objective: the loss against a brute-force computation, the readers on the real
caption and NLI files, the evaluation-overlap filter, and short real trainings."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from qtsearch import load_encoder
from qtsearch.core.errors import InputError
from qtsearch.encoders.files import read_metrics
from qtsearch.encoders.nn.objective import pairs_loss
from qtsearch.text.datasets.paraphrase_data import (
    Pair,
    drop_overlap,
    eval_sentences,
    hold_out,
    normalise,
    read_nli_csv,
    read_pairs,
    read_pairs_file,
)
from qtsearch.training.configs import MultitaskConfig, PairsTrainConfig
from qtsearch.training.multitask import train_multitask
from qtsearch.training.pairs_trainer import train_pairs

REPO = Path(__file__).resolve().parents[2]
M30K_VAL = "pairs/multi30k/val.1.en.gz"
SNLI_CSV = "nli/nli_datasets/snli/dev.csv"


# ----- loss ---------------------------------------------------------------------------------
def brute_force(a, p, n, scale):
    """Each direction's softmax cross-entropy written out one row at a time."""
    def cos(x, y):
        return float(x @ y) / (float(x.norm()) * float(y.norm()))

    def nll(row, candidates, target):
        scores = [scale * cos(row, c) for c in candidates]
        m = max(scores)
        log_z = m + math.log(sum(math.exp(s - m) for s in scores))
        return log_z - scores[target], max(range(len(scores)), key=scores.__getitem__)

    candidates = list(p) + (list(n) if n is not None else [])
    forward = [nll(a[i], candidates, i) for i in range(len(a))]
    backward = [nll(p[i], list(a), i)[0] for i in range(len(a))]
    loss = (sum(f[0] for f in forward) + sum(backward)) / (2 * len(a))
    correct = sum(f[1] == i for i, f in enumerate(forward))
    return loss, correct, len(a) / len(candidates)


@pytest.mark.parametrize("negatives", [0, 3])
@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_pairs_loss_matches_brute_force(negatives: int, scale: float) -> None:
    gen = torch.Generator().manual_seed(negatives + int(scale))
    a, p = torch.randn(9, 5, generator=gen), torch.randn(9, 5, generator=gen)
    p[:4] = a[:4] + 0.3 * p[:4]  # a few easy rows, so `correct` is not 0
    n = torch.randn(negatives, 5, generator=gen) if negatives else None
    st = pairs_loss(a, p, n, scale)
    loss, correct, chance = brute_force(a, p, n, scale)
    assert float(st.loss) == pytest.approx(loss, rel=1e-5)
    assert (st.correct, st.rows) == (correct, 9) and correct >= 4
    assert st.chance == pytest.approx(chance)


def test_pairs_loss_is_fp32_and_flows_to_both_sides() -> None:
    a = torch.randn(6, 4, requires_grad=True)
    p = torch.randn(6, 4, requires_grad=True)
    n = torch.randn(2, 4, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        st = pairs_loss(a.bfloat16(), p.bfloat16(), n.bfloat16())
    assert st.loss.dtype == torch.float32
    st.loss.backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (a, p, n))


# ----- readers ------------------------------------------------------------------------------
def test_caption_readers_on_the_real_files(shared_data: Path) -> None:
    val = read_pairs_file(shared_data / M30K_VAL)  # 1,014 images × 5 captions
    assert len(val) == 10 * 1014
    assert val[0] == Pair("A group of people stand in the back of a truck filled with cotton.",
                          "Men are standing on and about a truck carrying a white substance.")
    assert all(p.negative is None for p in val)
    train = read_pairs_file(shared_data / "pairs/multi30k/train.1.en.gz")
    assert len(train) == 289_955  # 29,000 images × 10 pairs, 45 of two identical captions left
    coco = read_pairs_file(shared_data / "pairs/coco/captions_val2017.json.gz")
    assert len(coco) == 50_055  # 5,000 images: 4,987 with 5 captions, 12 with 6, 1 with 7
    assert {normalise(p.anchor) != normalise(p.positive) for p in coco} == {True}


def test_nli_csv_reader_and_nli_pairs_on_the_real_files(shared_data: Path) -> None:
    rows = read_nli_csv(shared_data / SNLI_CSV)
    assert len(rows) == 9831
    assert rows[1] == ("Two women are embracing while holding to go packages.",
                       "Two woman are holding packages.", "entailment")
    snli = read_pairs_file(shared_data / SNLI_CSV)
    assert len(snli) == 3325  # the entailment rows
    assert snli[0].negative == "The men are fighting outside a deli."  # its contradiction
    assert sum(p.negative is not None for p in snli) == 3166
    # fields spanning two lines and HTML markup (add-one RTE)
    rte = read_nli_csv(shared_data / "nli/nli_datasets/add_one_rte/dev.csv")
    assert len(rte) == 387
    assert rte[0] == ("A dog looking at the camera in snow.",
                      "A dog looking at the camera in red snow.", "not_entailment")
    # the other NLI layouts go through qtsearch.text.datasets.nli_data
    assert len(read_pairs_file(shared_data / "nli/ketm/data/snli/test.txt")) == 3368


def test_bad_pair_files_are_one_line_input_errors(tmp_path: Path) -> None:
    lonely = tmp_path / "train.1.en.gz"
    lonely.write_bytes(gzip.compress(b"A dog.\nA cat.\n"))
    (tmp_path / "train.2.en.gz").write_bytes(gzip.compress(b"A puppy.\n"))
    bad_csv = tmp_path / "nli.csv"
    bad_csv.write_text("sentence1,sentence2,gold\na,b,entailment\n")
    bad_json = tmp_path / "captions.json"
    bad_json.write_text('{"images": []}')
    for path, message in ((lonely, "line-aligned"), (bad_csv, "header"),
                          (bad_json, "not a COCO captions file")):
        with pytest.raises(InputError, match=message) as e:
            read_pairs([path])
        assert "\n" not in str(e.value)


# ----- evaluation overlap and split ---------------------------------------------------------
def test_overlap_filter_drops_every_pair_sharing_an_evaluation_sentence(shared_data: Path) -> None:
    held = eval_sentences(shared_data / "sts")
    evaluation = [
        "A man with a hard hat is dancing.",  # STS-B dev (and STS 2012 MSRvid)
        "A group of kids is playing in a yard and an old man is standing in the background",  # SICK
        "Amrozi accused his brother, whom he called \"the witness\", of deliberately "
        "distorting his evidence.",  # MSRP train
    ]
    other = "A brown dog is chasing a red ball across a wide lawn near the lake."
    pairs = [Pair(other, "A dog runs after a ball."),
             Pair(other, "  a MAN with a hard hat is  dancing ")]  # case, spacing, no period
    pairs += [Pair(s, other) for s in evaluation] + [Pair(other, other, evaluation[2])]
    kept, dropped = drop_overlap(pairs, held)
    assert kept == pairs[:1] and dropped == 5
    # on the real captions: Flickr captions are in STS's image sets
    val = read_pairs_file(shared_data / M30K_VAL)
    kept, dropped = drop_overlap(val, held)
    assert dropped == 313 and len(kept) == len(val) - 313
    assert not {normalise(s) for p in kept for s in p.sentences()} & held


def test_hold_out_keeps_validation_sentences_out_of_training(shared_data: Path) -> None:
    pairs = read_pairs_file(shared_data / SNLI_CSV)
    train, valid = hold_out(pairs, lambda p: p.anchor, Pair.sentences, 0.1, seed=0)
    seen = {s for p in valid for s in p.sentences()}
    assert valid and not any(s in seen for p in train for s in p.sentences())
    assert hold_out(pairs, lambda p: p.anchor, Pair.sentences, 0.1, seed=0) == (train, valid)


# ----- training -----------------------------------------------------------------------------
def pairs_config(shared: Path, out: Path, **kw) -> PairsTrainConfig:
    base = dict(train=[str(shared / M30K_VAL), str(shared / SNLI_CSV)], out=str(out),
                hidden=32, glove_words=3000, batch_size=48, max_steps=60, val_every=30,
                checkpoint_every=30, data=str(shared))
    return PairsTrainConfig(**(base | kw))


@pytest.mark.slow
def test_short_real_pairs_training_improves_its_validation(shared_data: Path,
                                                           tmp_path: Path) -> None:
    torch.set_num_threads(1)
    result = train_pairs(pairs_config(shared_data, tmp_path))
    vals = [r for r in read_metrics(tmp_path) if "val_accuracy" in r]
    first, last = vals[0], vals[-1]
    assert (first["step"], last["step"], result.steps) == (0, 60, 60)
    assert last["val_loss"] < first["val_loss"] - 0.3, vals
    assert last["val_accuracy"] > first["val_accuracy"] + 0.05, vals
    assert last["val_accuracy"] > 10 * last["chance"]
    facts = json.loads((tmp_path / "config.json").read_text())["train"]
    assert facts["pairs_dropped_eval"] > 300  # Flickr captions of STS, SNLI sentences of SICK
    assert facts["pairs_negatives"] > 0
    enc = load_encoder(tmp_path, device="cpu")
    vecs = enc.encode(["A dog runs on the beach.", "A puppy is running by the sea."])
    assert vecs.shape == (2, 64) and np.isfinite(vecs).all()


@pytest.mark.slow
def test_pairs_resume_continues_exactly(shared_data: Path, tmp_path: Path) -> None:
    kw = dict(max_steps=8, val_every=4, checkpoint_every=4, hidden=16)
    train_pairs(pairs_config(shared_data, tmp_path / "whole", **kw))
    train_pairs(pairs_config(shared_data, tmp_path / "part", **(kw | {"max_steps": 4})))
    train_pairs(pairs_config(shared_data, tmp_path / "part", **kw), resume=True)
    a, b = (load_file(str(tmp_path / run / "weights.safetensors")) for run in ("whole", "part"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_multitask_with_pairs_improves_every_task(shared_data: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    config = MultitaskConfig(
        corpus=[str(shared_data / "gutenberg/0003-austen-jane--emma.txt.gz")],
        split_sentences=True, train=[str(shared_data / "nli/ketm/data/snli/test.txt")],
        pairs=[str(shared_data / M30K_VAL)], data=str(shared_data), out=str(tmp_path),
        hidden=32, fc_dim=64, glove_words=2000, vocab_size=3000, qt_batch_size=64,
        batch_size=64, pairs_batch_size=48, qt_val_blocks=8, schedule="round-robin",
        max_steps=90, val_every=45, checkpoint_every=90, lr=3e-3)
    train_multitask(config)
    vals = [r for r in read_metrics(tmp_path) if "val_accuracy" in r]
    first, last = vals[0], vals[-1]
    for prefix in ("", "qt_", "pairs_"):
        assert last[f"{prefix}val_loss"] < first[f"{prefix}val_loss"], (prefix, vals)
    assert last["pairs_val_accuracy"] > first["pairs_val_accuracy"]
    assert {r["task"] for r in read_metrics(tmp_path) if "task" in r} == {"qt", "nli", "pairs"}


def test_cli_train_pairs_refuses_bad_options_in_one_line(shared_data: Path,
                                                         tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-pairs",
                        str(shared_data / SNLI_CSV), "--out", str(tmp_path / "m"),
                        "--pairs-scale", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("qtsearch: error: --pairs-scale")
    assert r.stderr.strip().count("\n") == 0
