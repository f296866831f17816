"""The shipped default model and the demo: the README's first command ends in real results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qtsearch import load_encoder
from qtsearch.app.demo import CORPUS, ensure_demo_index
from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.encoders.files import latest_validation, read_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_demo_index(tmp_path_factory.mktemp("demo") / "index")


def test_shipped_model_is_small_safe_and_records_its_validation() -> None:
    files = {p.name for p in DEFAULT_MODEL.iterdir()}
    # the model folder, its pieces table (an open vocabulary, qtsearch.encoders.pieces) and its
    # card (no pickle, no checkpoint or cache)
    assert files == {"config.json", "vocab.json", "weights.safetensors", "metrics.jsonl",
                     "README.md", "pieces.safetensors"}
    assert sum(p.stat().st_size for p in DEFAULT_MODEL.iterdir()) < 40e6
    val = latest_validation(DEFAULT_MODEL)
    # the model card (default_model/README.md): the last validation (step 10,260, the end of
    # its three epochs) of the multi-task run, every task well above chance (pairs: in-batch
    # retrieval among 512, qa among 256, the batches it trained with)
    assert val["step"] == 10260
    assert val["pairs_val_accuracy"] == pytest.approx(0.5045, abs=1e-4)
    assert val["qa_val_accuracy"] == pytest.approx(0.7467, abs=1e-4)
    for task in ("", "qt_", "pairs_", "qa_", "teacher_"):
        assert val[f"{task}val_accuracy"] > 1.5 * val[f"{task}chance"], task
    config = read_config(DEFAULT_MODEL)
    assert config["encoder"]["encoder"] == "mean" and config["encoder"]["objective"] == "multitask"
    assert config["search"] == {"fit": "centre", "lexical_weight": 0.3}
    # trained on questions of SQuAD's training articles and MedQuAD (qtsearch.text.datasets.qa)
    assert config["train"]["qa_train"] > 80_000
    # trained with negated positives as hard negatives (qtsearch.text.negation)
    assert config["train"]["negations"] and config["train"]["pairs_negations"] > 200_000
    assert config["train"]["pairs_batch_size"] == 512
    assert load_encoder().dim == 256


def test_shipped_model_encodes_identically_after_reload() -> None:
    sentences = ["It rained hard all morning and the roads were wet.", "a dog runs", ""] * 5
    first, again = load_encoder(), load_encoder()
    assert np.array_equal(first.encode(sentences), again.encode(sentences))
    one_by_one = np.stack([first.encode([s])[0] for s in sentences])
    np.testing.assert_allclose(one_by_one, first.encode(sentences), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_battle_finds_war_and_songs_find_music(demo_index: Path) -> None:
    from qtsearch.search.engine import Index

    with Index.open(demo_index, device="cpu") as index:
        assert index.count > 5000
        battle, song = index.search(["The army was defeated in the battle and the soldiers "
                                     "retreated.", "The song reached number one on the charts."],
                                    k=10)
    war = ("army", "armies", "battle", "troops", "soldiers", "forces", "division", "regiment",
           "war", "fighting", "attack", "enemy", "infantry", "brigade", "battalion")
    music = ("song", "single", "album", "chart", "music", "band", "track", "hot 100")
    assert sum(any(w in h.text.lower() for w in war) for h in battle) >= 5, [h.text for h in battle]
    assert sum(any(w in h.text.lower() for w in music) for h in song) >= 5, [h.text for h in song]


@pytest.mark.slow
def test_demo_command_prints_results_and_reuses_its_index(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    cmd = [sys.executable, str(REPO / "cli.py"), "demo", "--out", str(out), "-k", "3"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert "search: The army was defeated" in first.stdout and "analogy:" in first.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["corpus"][0]["path"].endswith(CORPUS.name)
    built = (out / "index.faiss").stat().st_mtime_ns
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and (out / "index.faiss").stat().st_mtime_ns == built
