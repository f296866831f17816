"""Negation: negated positives as hard negatives (`--negations`: the rules on real captions,
the evaluation sentences they must never produce) and the mean encoder's negation scopes
(`--negation-scope`: the scopes found, numpy and torch agreeing), in short real trainings."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from qtsearch import load_encoder
from qtsearch.encoders.nn.folder import load_model
from qtsearch.encoders.nn.mean_words import in_scope as torch_in_scope
from qtsearch.text.datasets.paraphrase_data import Pair, normalise, read_pairs_file
from qtsearch.text.negation import CUE, END, PLAIN, in_scope, negate, with_negations, word_roles
from qtsearch.text.tokenizer import tokenize
from qtsearch.training.configs import PairsTrainConfig
from qtsearch.training.pairs_trainer import train_pairs

REPO = Path(__file__).resolve().parents[2]
M30K_VAL = "pairs/multi30k/val.1.en.gz"
NEGATION = re.compile(r"\b(not|no)\b")


@pytest.mark.parametrize(("sentence", "negated"), [
    ("A man is playing a guitar.", "A man is not playing a guitar."),
    ("Two dogs are running through the snow", "Two dogs are not running through the snow"),
    ("There is a dog in the park.", "There is no dog in the park."),
    ("there are some kids on a bench", "there are no kids on a bench"),
    ("A man riding a wave on a surfboard.", "There is no man riding a wave on a surfboard."),
    ("An old woman knitting.", "There is no old woman knitting."),
    ("Is it raining?", None),  # a question's leading auxiliary is left alone
    ("The man is not here.", None),  # already negated
    ("Nobody is on the beach.", None),
    ("He isn't home.", None),
    ("Two men standing near a stove.", None),  # no rule fits
    ("", None),
])
def test_negate_rules(sentence: str, negated: str | None) -> None:
    assert negate(sentence) == negated


def test_negations_of_real_captions(shared_data: Path) -> None:
    captions = sorted({p.positive for p in read_pairs_file(shared_data / M30K_VAL)})
    negated = {c: negate(c) for c in captions}
    made = {c: n for c, n in negated.items() if n is not None}
    assert len(made) > 0.7 * len(captions)  # the three rules fit about three in four
    for caption, n in made.items():
        assert not NEGATION.search(caption.lower()) and NEGATION.search(n.lower()), (caption, n)
        # only the negation is added: the caption's words stay, in order
        words = [w for w in n.split() if w.lower() not in ("not", "no", "there", "is")]
        kept = [w for w in caption.split() if w.lower() not in ("a", "an", "there", "is")]
        assert [w for w in words if w.lower() not in ("a", "an")] == kept, (caption, n)


def test_with_negations_keeps_given_negatives_and_never_makes_an_evaluation_sentence(
        shared_data: Path) -> None:
    pairs = [Pair("A dog runs on grass.", "A dog is running on the grass."),
             Pair("A man plays.", "A man is playing.", "A man is sleeping."),
             Pair("Kids play.", "Some kids are playing."),
             Pair("Two men stand.", "Two men standing.")]
    held = frozenset({normalise("Some kids are not playing")})
    out, added, held_back = with_negations(pairs, held)
    assert (added, held_back) == (1, 1)
    assert out[0] == Pair(pairs[0].anchor, pairs[0].positive, "A dog is not running on the grass.")
    assert out[1:] == pairs[1:]  # its own negative kept; an evaluation sentence; no rule


def scopes(*sentences: str) -> list[list[str]]:
    """The words in a negation's scope, per sentence, found over the concatenated tokens."""
    tokens = [tokenize(s) for s in sentences]
    lengths = np.array([len(t) for t in tokens])
    flat = [w for t in tokens for w in t]
    flags = in_scope(word_roles(flat), np.cumsum(lengths) - lengths)
    ends = np.cumsum(lengths)
    return [[w for w, f in zip(flat[e - n:e], flags[e - n:e], strict=True) if f]
            for e, n in zip(ends, lengths, strict=True)]


def test_negation_scopes() -> None:
    assert scopes("A man is not playing a guitar, he is singing.", "No one is here",
                  "He isn't home.", "A dog runs in the snow", "Never mind; nobody came but me",
                  "I can't say.", "NOT this") == [
        ["playing", "a", "guitar"], ["one", "is", "here"], ["home"], [],
        ["mind", "came"], ["say"], ["this"]]
    # a scope never runs into the next sentence
    assert scopes("It is not", "A man is playing") == [[], []]


def test_numpy_and_torch_find_the_same_scopes() -> None:
    rng = np.random.default_rng(0)
    roles = rng.choice([PLAIN, CUE, END], size=(64, 20), p=[0.7, 0.15, 0.15]).astype(np.float32)
    lengths = rng.integers(1, 21, size=64)
    expected = torch_in_scope(torch.from_numpy(roles)).numpy()
    flat = np.concatenate([r[:n] for r, n in zip(roles, lengths, strict=True)])
    got = in_scope(flat, np.cumsum(lengths) - lengths)
    assert np.array_equal(got, np.concatenate([e[:n] for e, n in
                                               zip(expected, lengths, strict=True)]))


def config(shared: Path, out: Path, **kw) -> PairsTrainConfig:
    base = dict(train=[str(shared / M30K_VAL)], out=str(out), hidden=32, glove_words=3000,
                batch_size=48, max_steps=200, val_every=200, checkpoint_every=200,
                data=str(shared), encoder="mean", word_vectors="glove", lr=1e-2)
    return PairsTrainConfig(**(base | kw))


@pytest.mark.slow
def test_training_with_negations_pulls_negated_sentences_apart(shared_data: Path,
                                                               tmp_path: Path) -> None:
    """Short real runs on the same pairs, without and with --negations (and with negation
    scopes): only those with negations learn that a negated sentence is not a paraphrase
    (cosine of sentence and negation)."""
    torch.set_num_threads(1)
    runs = {"plain": {}, "negations": {"negations": True},
            "scope": {"negations": True, "negation_scope": True}}
    for name, kw in runs.items():
        train_pairs(config(shared_data, tmp_path / name, **kw))
    facts = json.loads((tmp_path / "negations" / "config.json").read_text())["train"]
    assert facts["pairs_negations"] > 0.5 * facts["pairs_train"]
    assert "pairs_negations" not in json.loads(
        (tmp_path / "plain" / "config.json").read_text())["train"]
    probes = ["A woman is cutting an onion.", "Two boys are playing soccer in a park.",
              "A man is riding a horse on the beach.", "A dog is jumping over a fence.",
              "Three people are sitting on a bench.", "A girl is reading a book in bed."]
    cosines = {}
    for name in runs:
        enc = load_encoder(tmp_path / name, device="cpu")
        a = enc.encode(probes, normalize=True)
        b = enc.encode([negate(p) for p in probes], normalize=True)
        cosines[name] = float(np.mean(np.sum(a * b, axis=1)))
    assert cosines["negations"] < cosines["plain"] - 0.05, cosines
    assert cosines["scope"] < cosines["plain"] - 0.05, cosines


@pytest.mark.slow
def test_a_model_with_negation_scopes_encodes_alike_in_numpy_and_torch(
        shared_data: Path, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    train_pairs(config(shared_data, tmp_path, negations=True, negation_scope=True, max_steps=60,
                       val_every=60, checkpoint_every=60))
    model, vocab, _ = load_model(tmp_path)
    assert model.cfg.negation_scope
    assert not torch.equal(model.negated, torch.ones_like(model.negated))  # it trained
    assert np.array_equal(model.roles.numpy(), word_roles(vocab.words))  # saved with the weights
    enc = load_encoder(tmp_path, device="cpu")  # numpy
    sentences = ["A man is not playing a guitar, he is singing.", "No one is here.",
                 "He isn't home", "A dog runs in the snow.", "Never mind; nobody came",
                 "He did not say no to nobody"] * 50  # cues inside a scope
    ids = [enc.token_ids(s) for s in sentences]
    batch = torch.zeros(len(ids), max(map(len, ids)), dtype=torch.long)
    for i, row in enumerate(ids):
        batch[i, : len(row)] = torch.tensor(row)
    with torch.no_grad():
        expected = model.embed(batch, torch.tensor([len(r) for r in ids])).numpy()
    for got in (enc.encode(sentences[:5]), enc.encode(sentences)):  # gather, sparse product
        np.testing.assert_allclose(got, expected[: len(got)], rtol=1e-5, atol=1e-6)


def test_cli_refuses_negations_without_hard_negatives(shared_data: Path, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-pairs",
                        str(shared_data / M30K_VAL), "--out", str(tmp_path / "m"),
                        "--negations", "--no-hard-negatives"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("qtsearch: error: --negations")
    assert r.stderr.strip().count("\n") == 0
    r = subprocess.run([sys.executable, str(REPO / "cli.py"), "train-pairs",
                        str(shared_data / M30K_VAL), "--out", str(tmp_path / "m"),
                        "--negation-scope"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("qtsearch: error: --negation-scope")
    assert r.stderr.strip().count("\n") == 0
