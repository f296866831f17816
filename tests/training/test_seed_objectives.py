"""FastSent, the SDAE and the Transformer encoder: losses against definitions written out by hand,
noise and padding properties, the warm-up schedule, and short real trainings on a novel."""

from __future__ import annotations

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
from qtsearch.core.errors import UsageError
from qtsearch.encoders.files import read_metrics
from qtsearch.encoders.nn.fastsent import PREDICTED_WORDS, fastsent_loss
from qtsearch.encoders.nn.quick_thoughts import EncoderConfig, TransformerEncoder
from qtsearch.encoders.nn.sdae import SDAE, add_noise
from qtsearch.training.configs import TrainConfig
from qtsearch.training.loop import lr_factor
from qtsearch.training.trainer import train

REPO = Path(__file__).resolve().parents[2]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"


def config(shared: Path, out: Path, **kw) -> TrainConfig:
    base = dict(
        corpus=[str(shared / BOOK)], out=str(out), hidden=32, word_dim=32, vocab_size=3000,
        batch_size=64, max_steps=40, split_sentences=True, val_every=20, checkpoint_every=20,
        lr=3e-3,
    )
    return TrainConfig(**(base | kw))


def validations(folder: Path) -> list[dict]:
    return [r for r in read_metrics(folder) if "val_accuracy" in r]


# ----- FastSent ------------------------------------------------------------------------------
def fastsent_brute_force(s, v, b, ids, docs, context, autoencode):
    """The paper's definition (plus an output bias), one (sentence, neighbour, word) at a time."""
    reach = (context - 1) // 2
    nll, hits, base, n = 0.0, 0, 0, 0
    for i in range(len(docs)):
        scores = [float(s[i] @ v[w] + b[w]) for w in range(len(v))]
        log_z = math.log(sum(math.exp(x) for x in scores))
        top = sorted(range(len(v)), key=lambda w: -scores[w])[:PREDICTED_WORDS]
        for j in range(len(docs)):
            near = 1 <= abs(i - j) <= reach or (autoencode and i == j)
            if not near or docs[i] != docs[j]:
                continue
            for w in ids[j]:
                if w > 1:  # neither <pad> nor <unk>
                    nll += log_z - scores[w]
                    hits += w in top
                    base += 2 <= w < 2 + PREDICTED_WORDS
                    n += 1
    return nll / n, hits, base, n


@pytest.mark.parametrize("autoencode", [False, True])
@pytest.mark.parametrize("context", [3, 5])
def test_fastsent_loss_matches_brute_force(context: int, autoencode: bool) -> None:
    gen = torch.Generator().manual_seed(context + autoencode)
    docs = [0, 0, 0, 1, 2, 2, 2, 2]  # document 1 is one sentence: it predicts nothing
    lengths = [3, 5, 1, 4, 2, 6, 3, 5]
    ids = torch.zeros(8, 6, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(1, 40, (n,), generator=gen)  # <unk> (1) included
    s, v = torch.randn(8, 5, generator=gen), torch.randn(40, 5, generator=gen)
    b = torch.randn(40, generator=gen)
    st = fastsent_loss(s, v, b, ids, torch.tensor(docs), context, autoencode)
    loss, hits, base, n = fastsent_brute_force(s, v, b, ids.tolist(), docs, context, autoencode)
    assert (st.rows, st.correct, st.chance) == (n, hits, base)
    assert float(st.loss) == pytest.approx(loss, rel=1e-5)


# ----- SDAE ----------------------------------------------------------------------------------
def padded(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.zeros(len(rows), max(map(len, rows)), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    return ids, torch.tensor([len(r) for r in rows])


def unpadded(ids: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    return [row[:n] for row, n in zip(ids.tolist(), lengths.tolist())]


def test_noise_without_probability_is_the_identity_and_swaps_non_overlapping_bigrams() -> None:
    ids, lengths = padded([[5, 6, 7, 8, 9], [3], [4, 2]])
    same = add_noise(ids, lengths, np.random.default_rng(0), 0.0, 0.0)
    assert unpadded(*same) == unpadded(ids, lengths)
    swapped = add_noise(ids, lengths, np.random.default_rng(0), 0.0, 1.0 - 1e-12)
    assert unpadded(*swapped) == [[6, 5, 8, 7, 9], [3], [2, 4]]


def test_noise_rates_lengths_and_seed() -> None:
    rows = [list(range(2 + 100 * i, 2 + 100 * i + n)) for i, n in enumerate([1, 7, 30] * 400)]
    ids, lengths = padded(rows)
    drop_ids, drop_len = add_noise(ids, lengths, np.random.default_rng(1), 0.1, 0.0)
    assert ((drop_len >= 1) & (drop_len <= lengths)).all()
    kept = unpadded(drop_ids, drop_len)
    assert all(k == [w for w in r if w in set(k)] for r, k in zip(rows, kept))  # order kept
    dropped = 1 - drop_len.sum() / lengths.sum()
    assert 0.09 < float(dropped) < 0.11
    swap_ids, swap_len = add_noise(ids, lengths, np.random.default_rng(2), 0.0, 0.1)
    assert torch.equal(swap_len, lengths)
    noisy = unpadded(swap_ids, swap_len)
    pairs = [(r[k], r[k + 1]) for r in noisy for k in range(0, len(r) - 1, 2)]
    swapped = sum(a > b for a, b in pairs) / len(pairs)
    assert 0.08 < swapped < 0.12
    again = add_noise(ids, lengths, np.random.default_rng(1), 0.1, 0.0)
    assert torch.equal(again[0], drop_ids)
    alone = add_noise(*padded([[9]] * 50), np.random.default_rng(3), 0.99, 0.5)
    assert unpadded(*alone) == [[9]] * 50  # a sentence never becomes empty


@torch.no_grad()
def test_sdae_loss_ignores_padding_and_equals_per_sentence_losses() -> None:
    torch.manual_seed(0)
    model = SDAE(EncoderConfig(encoder="uni", vocab_size=50, word_dim=8, hidden=12,
                               objective="sdae")).eval()
    ids, lengths = padded([[5, 9, 2, 7], [3, 3], [8, 6, 4, 11, 12, 2, 1]])
    state = model.embed(ids, lengths)
    st = model.reconstruction(state, ids, lengths)
    assert st.rows == int(lengths.sum())
    wide = torch.cat([ids, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    junk = torch.where(wide == 0, torch.randint(2, 50, wide.shape), wide)  # words where pads are
    for other in (wide, junk):
        assert float(model.reconstruction(state, other, lengths).loss) == pytest.approx(
            float(st.loss), rel=1e-6)
    alone = [model.reconstruction(state[i : i + 1], ids[i : i + 1], lengths[i : i + 1])
             for i in range(3)]
    weighted = sum(float(a.loss) * a.rows for a in alone) / st.rows
    assert float(st.loss) == pytest.approx(weighted, rel=1e-5)
    assert st.correct == sum(a.correct for a in alone)


# ----- Transformer and schedule --------------------------------------------------------------
def test_transformer_vector_does_not_depend_on_the_batch_padding() -> None:
    torch.manual_seed(0)
    enc = TransformerEncoder(EncoderConfig(encoder="transformer", vocab_size=60, word_dim=16,
                                           hidden=32, heads=4, layers=2)).eval()
    gen = torch.Generator().manual_seed(1)
    rows = [torch.randint(2, 60, (n,), generator=gen).tolist() for n in [3, 9, 1, 30] * 40]
    ids, lengths = padded(rows)  # 160 rows: read in groups of similar length
    with torch.no_grad():
        together = enc(ids, lengths)
        for i in (0, 1, 2, 3, 100):
            alone = enc(*padded([rows[i]]))
            torch.testing.assert_close(together[i : i + 1], alone, atol=1e-5, rtol=1e-5)


def test_warmup_then_decay_values() -> None:
    assert [lr_factor(s, 4, "inverse-sqrt", 100) for s in (1, 2, 4, 16, 64)] == [
        0.25, 0.5, 1.0, 0.5, 0.25]
    assert [lr_factor(s, 4, "linear", 10) for s in (2, 5, 8, 10)] == [0.5, 1.0, 0.5, 1 / 6]
    assert [lr_factor(s, 0, "constant", 10) for s in (1, 10)] == [1.0, 1.0]
    assert lr_factor(3, 2, "constant", 10) == 1.0


# ----- real trainings ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("objective", "options", "dim", "drop"),
    [
        # FastSent starts at the loss of a frequency-only predictor (its output bias starts at
        # the log unigram frequencies): any fall is what the sentence vectors add
        ("fastsent", {"batch_size": 100, "lr": 1e-3, "max_steps": 300, "val_every": 100},
         32, 0.03),
        ("sdae", {"batch_size": 32}, 32, 0.5),
        ("qt", {"encoder": "transformer", "hidden": 64, "word_dim": 64, "heads": 4,
                "layers": 1, "lr": 1e-3, "warmup_steps": 10, "max_steps": 60}, 128, 0.03),
    ],
)
@pytest.mark.slow
def test_short_real_training_improves_its_validation_metric(
    objective: str, options: dict, dim: int, drop: float, shared_data: Path, tmp_path: Path
) -> None:
    result = train(config(shared_data, tmp_path, objective=objective, **options))
    vals = validations(tmp_path)
    first, last = vals[0], vals[-1]
    assert first["step"] == 0 and last["step"] == result.steps
    assert first["val_loss"] - last["val_loss"] > drop, vals
    assert last["val_accuracy"] > first["val_accuracy"], vals
    assert last["val_accuracy"] > last["chance"], vals  # beats the input-blind baseline
    enc = load_encoder(tmp_path)
    assert enc.dim == dim and enc.encode(["Emma smiled.", "Mr. Knightley came."]).shape == (2, dim)
    if objective == "qt":  # after 10 warm-up steps, --lr × √(10 / step)
        lrs = [r["lr"] for r in read_metrics(tmp_path) if "lr" in r]
        assert lrs == pytest.approx([1e-3 * math.sqrt(10 / s) for s in (20, 40, 60)])


@pytest.mark.parametrize(
    ("objective", "options"),
    [("sdae", {"batch_size": 32}), ("qt", {"encoder": "transformer", "heads": 4, "layers": 1,
                                            "warmup_steps": 4})],
)
@pytest.mark.slow
def test_resume_is_exact_with_noise_and_dropout(objective: str, options: dict,
                                               shared_data: Path, tmp_path: Path) -> None:
    kw = dict(objective=objective, max_steps=8, val_every=4, checkpoint_every=4, **options)
    train(config(shared_data, tmp_path / "full", **kw))
    train(config(shared_data, tmp_path / "split", **(kw | {"max_steps": 4})))
    train(config(shared_data, tmp_path / "split", **kw), resume=True)
    a = load_file(str(tmp_path / "full" / "weights.safetensors"))
    b = load_file(str(tmp_path / "split" / "weights.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_checkpoint_from_before_the_new_options_still_resumes(shared_data: Path,
                                                              tmp_path: Path) -> None:
    cfg = config(shared_data, tmp_path, encoder="uni", max_steps=4, checkpoint_every=2)
    train(config(shared_data, tmp_path, encoder="uni", max_steps=2))
    state_path = tmp_path / "checkpoint" / "state.json"
    state = json.loads(state_path.read_text())
    for key in ("objective", "layers", "heads", "warmup_steps", "lr_schedule", "fastsent_ae",
                "word_dropout", "swap_prob"):
        del state["config"][key]
    state_path.write_text(json.dumps(state))
    assert train(cfg, resume=True).steps == 4


# ----- options and the shipped model ---------------------------------------------------------
@pytest.mark.parametrize(
    "options",
    [
        {"objective": "skip-thought"},
        {"objective": "fastsent", "encoder": "uni"},
        {"objective": "sdae", "encoder": "transformer"},
        {"encoder": "transformer", "hidden": 30, "heads": 8},
        {"lr_schedule": "cosine"},
        {"objective": "sdae", "word_dropout": 1.0},
        {"warmup_steps": -1},
    ],
)
def test_bad_combinations_are_refused(options: dict, shared_data: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        train(config(shared_data, tmp_path, **options))


@pytest.mark.slow
def test_cli_refuses_a_bad_objective_in_one_line(shared_data: Path, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "cli.py"), "train", str(shared_data / BOOK), "--out",
         str(tmp_path / "m"), "--objective", "fastsent", "--encoder", "bi"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 2 and r.stderr.startswith("qtsearch: error:"), r.stderr
    assert r.stderr.strip().count("\n") == 0 and "bow" in r.stderr


def test_shipped_model_encodes_exactly_as_before() -> None:
    """Reference values of the shipped mean-of-words model computed when it was shipped (fp32):
    a change to tokenising, lookup or encoding that moves its vectors fails here."""
    enc = load_encoder(device="cpu", precision="fp32")
    vec = enc.encode(["The army was defeated in the battle.", "Emma smiled.",
                      "The army was not defeated in the battle."])  # a negation's scope
    assert enc.fingerprint == "e22ba18742c55e79"  # weights, vocabulary and pieces table
    np.testing.assert_allclose(vec[:, :4], [[0.20158339, 0.03284454, -0.02682036, -0.00008678],
                                            [0.17981212, 0.19913737, -0.32572427, -0.39257812],
                                            [-0.02101199, 0.05912354, -0.02923843, 0.01663413]],
                               atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(vec, axis=1), [1.5647988, 2.9421849, 1.3545302],
                               rtol=1e-5)
