"""InferSent on NLI: the reader on the real files, the model's pieces, and a real short training."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from qtsearch import load_encoder
from qtsearch.core.errors import InputError, ModelError, UsageError
from qtsearch.encoders.files import read_metrics
from qtsearch.encoders.nn.infersent import InferSent, NLIClassifier, pair_features
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig
from qtsearch.text.datasets.nli_data import LABELS, label_counts, read_nli
from qtsearch.training.configs import NLITrainConfig
from qtsearch.training.nli_trainer import train_nli
from qtsearch.training.objectives.entailment import NLITask, split_by_premise

REPO = Path(__file__).resolve().parents[2]
SNLI = "nli/ketm/data/snli/test.txt"
SICK_TRAIN = "nli/ketm/data/sick/train.txt"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *args],
                          capture_output=True, text=True, timeout=300)


def nli_config(shared: Path, out: Path, **kw) -> NLITrainConfig:
    base = dict(train=[str(shared / SNLI)], out=str(out), hidden=48, fc_dim=64,
                glove_words=2000, max_steps=80, val_every=40, checkpoint_every=40, lr=3e-3)
    base.update(kw)
    return NLITrainConfig(**base)


@pytest.fixture(scope="module")
def nli_model(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("nli_model")
    train_nli(nli_config(shared_data, out))
    return out


# ----- reader -------------------------------------------------------------------------------
def test_reader_counts_and_labels_of_the_real_files(shared_data: Path) -> None:
    snli = read_nli([shared_data / SNLI])
    assert len(snli) == 9824
    assert label_counts(snli) == {"entailment": 3368, "neutral": 3219, "contradiction": 3237}
    assert snli[1].hypothesis == "the church is filled with song"
    assert LABELS[snli[1].label] == "entailment"
    assert LABELS[snli[2].label] == "contradiction"  # "a choir singing at a baseball game"
    sick = read_nli([shared_data / SICK_TRAIN])  # 5 columns, a byte-order mark on line 1
    assert len(sick) == 4498
    assert label_counts(sick) == {"entailment": 1299, "neutral": 2535, "contradiction": 664}
    assert sick[0].premise.startswith("A group of kids")
    assert LABELS[sick[2].label] == "entailment"  # as in the original SICK_train.txt


def test_official_snli_layouts_read_the_same_pairs(shared_data: Path, tmp_path: Path) -> None:
    """The same real pairs as SNLI .jsonl and .txt (with header), plus one unlabeled pair."""
    pairs = read_nli([shared_data / SNLI])[:30]
    names = [LABELS[p.label] for p in pairs]
    rows = [{"gold_label": n, "sentence1": p.premise, "sentence2": p.hypothesis, "pairID": i}
            for i, (p, n) in enumerate(zip(pairs, names))]
    rows.insert(5, {"gold_label": "-", "sentence1": "no", "sentence2": "agreement"})
    (tmp_path / "snli.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    header = "gold_label\tsentence1_parse\tsentence1\tsentence2\tcaptionID\n"
    (tmp_path / "snli.txt").write_text(header + "".join(
        f"{r['gold_label']}\t( x )\t{r['sentence1']}\t{r['sentence2']}\tc\n" for r in rows))
    assert read_nli([tmp_path / "snli.jsonl"]) == pairs
    assert read_nli([tmp_path / "snli.txt"]) == pairs


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (b"a man\ta woman\t1\nbroken line without tabs\n", ":2: expected premise"),
        (b"a man\ta woman\tmaybe\n", ":1: unknown label 'maybe'"),
        (b'{"sentence1": "a", "gold_label": "neutral"}\n', ":1: not an NLI JSON line"),
        (b"\x00\x01\x02\x03" * 300, "binary"),
        (b"gold_label\tsentence1\nneutral\ta\n", "header lacks"),
    ],
)
def test_bad_files_raise_one_line_input_errors(tmp_path: Path, content: bytes,
                                               message: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message) as e:
        read_nli([path])
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_cli_bad_input_exits_with_the_documented_codes(tmp_path: Path) -> None:
    missing = cli("train-nli", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "m"))
    assert missing.returncode == 3
    assert missing.stderr.strip().startswith("qtsearch: error:")
    assert "no such file" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.txt"
    bad.write_text("a\tb\tperhaps\n")
    assert cli("train-nli", str(bad), "--out", str(tmp_path / "m")).returncode == 3
    usage = cli("train-nli", str(bad), "--out", str(tmp_path / "m"), "--hidden", "0")
    assert usage.returncode == 2 and "--hidden" in usage.stderr
    bad.write_text("a man\ta woman\t1\n")
    unwritable = cli("train-nli", str(bad), "--valid", str(bad), "--out", str(bad / "m"))
    assert unwritable.returncode == 6 and "cannot write" in unwritable.stderr


def test_premise_split_keeps_validation_sentences_out_of_training(shared_data: Path) -> None:
    pairs = read_nli([shared_data / SNLI, shared_data / SICK_TRAIN])
    train, valid = split_by_premise(pairs, 0.1, seed=0)
    held = {s for p in valid for s in (p.premise, p.hypothesis)}
    assert not any(p.premise in held or p.hypothesis in held for p in train)
    assert 0.08 < len(valid) / len(pairs) < 0.12
    assert split_by_premise(pairs, 0.1, seed=0) == (train, valid)


# ----- model pieces -------------------------------------------------------------------------
def test_pair_features_are_u_v_absdiff_product() -> None:
    u = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    v = torch.tensor([[4.0, 1.0], [0.5, -1.0]])
    expected = torch.tensor([[1.0, -2.0, 4.0, 1.0, 3.0, 3.0, 4.0, -2.0],
                             [0.5, 3.0, 0.5, -1.0, 0.0, 4.0, 0.25, -3.0]])
    assert torch.equal(pair_features(u, v), expected)
    head = NLIClassifier(dim=2, fc_dim=8)
    assert head(u, v).shape == (2, 3)


def test_loss_is_cross_entropy_of_the_classifier_on_both_vectors() -> None:
    torch.manual_seed(0)
    enc = InferSent(EncoderConfig(encoder="infersent", vocab_size=30, word_dim=6, hidden=5))
    head = NLIClassifier(enc.dim, fc_dim=7)
    ip = torch.tensor([[3, 4, 5], [6, 7, 0]])
    ih = torch.tensor([[8, 0], [9, 10]])
    lp, lh, y = torch.tensor([3, 2]), torch.tensor([1, 2]), torch.tensor([2, 0])
    loss, correct = NLITask.loss(enc, head, (ip, lp, ih, lh, y), contextlib.nullcontext)
    logits = head.mlp(torch.cat([enc(ip, lp), enc(ih, lh), (enc(ip, lp) - enc(ih, lh)).abs(),
                                 enc(ip, lp) * enc(ih, lh)], dim=1))
    assert torch.allclose(loss, torch.nn.functional.cross_entropy(logits, y))
    assert correct == int((logits.argmax(1) == y).sum())


def test_max_pooling_ignores_padding() -> None:
    """A sentence's vector is the max over its own steps only: the same alone, in a padded
    batch, and with junk ids in the padding."""
    torch.manual_seed(0)
    enc = InferSent(EncoderConfig(encoder="infersent", vocab_size=50, word_dim=8, hidden=6))
    enc.set_frozen_vectors(torch.randn(50, 50))
    enc.eval()
    short = torch.tensor([[5, 9, 2]])
    alone = enc.embed(short, torch.tensor([3]))
    batch = torch.tensor([[5, 9, 2, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6, 7]])
    lengths = torch.tensor([3, 7])
    padded = enc.embed(batch, lengths)
    junk = batch.clone()
    junk[0, 3:] = torch.tensor([40, 41, 42, 43])
    assert torch.allclose(padded[0], alone[0], atol=1e-6)
    assert torch.allclose(enc.embed(junk, lengths)[0], alone[0], atol=1e-6)
    # and it is the max over the three real steps of forward ⊕ backward states
    x = torch.cat([enc.frozen(short), enc.words(short)], dim=-1)
    fwd = enc.rnn.fwd(x)[0][0]
    bwd = enc.rnn.bwd(x.flip(1))[0][0].flip(0)
    assert torch.allclose(alone[0], torch.cat([fwd, bwd], dim=-1).max(dim=0).values, atol=1e-6)


# ----- training -----------------------------------------------------------------------------
def test_short_real_training_beats_chance_and_the_untrained_model(nli_model: Path) -> None:
    vals = [r for r in read_metrics(nli_model) if "val_accuracy" in r]
    first, last = vals[0], vals[-1]
    assert (first["step"], last["step"]) == (0, 80)
    assert last["val_accuracy"] > last["chance"] + 0.08  # ≈ 0.33-0.34 on SNLI
    assert last["val_accuracy"] > first["val_accuracy"] + 0.08
    assert last["val_loss"] < first["val_loss"]
    config = json.loads((nli_model / "config.json").read_text())
    assert config["encoder"]["objective"] == "nli"
    assert config["train"]["train_pairs"] + config["train"]["valid_pairs"] <= 9824
    heads = load_file(str(nli_model / "heads.safetensors"))
    assert heads["nli.mlp.1.weight"].shape == (64, 4 * 96)


def test_model_folder_loads_with_load_encoder_and_encodes(nli_model: Path) -> None:
    enc = load_encoder(nli_model, device="cpu")
    sentences = ["A man is playing a guitar.", "Two dogs run through the snow", ""]
    vecs = enc.encode(sentences)
    assert vecs.shape == (3, 96) and enc.dim == 96
    assert np.isfinite(vecs).all()
    again = enc.encode(sentences[::-1])[::-1]
    assert np.allclose(vecs, again, atol=1e-5)  # batch order and padding do not matter
    info = cli("info", str(nli_model), "--json")
    assert info.returncode == 0 and json.loads(info.stdout)["step"] == 80


def test_resume_continues_exactly(shared_data: Path, tmp_path: Path) -> None:
    kw = dict(max_steps=12, val_every=6, checkpoint_every=6, hidden=16, fc_dim=16)
    whole = tmp_path / "whole"
    train_nli(nli_config(shared_data, whole, **kw))
    part = tmp_path / "part"
    train_nli(nli_config(shared_data, part, **{**kw, "max_steps": 6}))
    train_nli(nli_config(shared_data, part, **kw), resume=True)
    a = load_file(str(whole / "weights.safetensors"))
    b = load_file(str(part / "weights.safetensors"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    vals = [[r for r in read_metrics(f) if "val_accuracy" in r] for f in (part, whole)]
    assert vals[0] == vals[1] and [r["step"] for r in vals[0]] == [0, 6, 12]
    with pytest.raises(UsageError, match="--lr differs"):
        train_nli(nli_config(shared_data, part, **{**kw, "lr": 1e-3}), resume=True)
    with pytest.raises(ModelError, match="no checkpoint"):
        train_nli(nli_config(shared_data, tmp_path / "new", **kw), resume=True)


def test_random_baseline_of_an_nli_model(nli_model: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`random:DIR` works for InferSent folders: same architecture and GloVe table, untrained."""
    from qtsearch.encoders.registry import random_like

    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path))
    trained = load_encoder(nli_model, device="cpu")
    rand = random_like(nli_model, device="cpu")
    assert rand.dim == trained.dim and rand.fingerprint != trained.fingerprint
    torch.testing.assert_close(rand.model.frozen.weight, trained.model.frozen.weight)
    texts = ["A man is playing a guitar.", "Two dogs run on the beach."]
    assert not np.allclose(rand.encode(texts), trained.encode(texts))
