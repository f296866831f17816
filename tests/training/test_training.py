"""The trainer on real books: it learns, saves, reloads, resumes exactly, and refuses bad input."""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from qtsearch import load_encoder
from qtsearch.core.errors import InputError, UsageError
from qtsearch.encoders.files import latest_validation, read_metrics
from qtsearch.training.configs import TrainConfig
from qtsearch.training.trainer import train

REPO = Path(__file__).resolve().parents[2]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"


def small_config(shared: Path, out: Path, **kw) -> TrainConfig:
    base = dict(
        corpus=[str(shared / BOOK)],
        out=str(out),
        encoder="uni",
        hidden=32,
        word_dim=16,
        vocab_size=3000,
        batch_size=64,
        max_steps=12,
        split_sentences=True,
        val_every=6,
        checkpoint_every=6,
        lr=3e-3,
    )
    base.update(kw)
    return TrainConfig(**base)


def cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "cli.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        **kw,
    )


def test_sixty_steps_on_real_books_learn_the_context(tiny_model: Path) -> None:
    """Held-out cross-entropy falls and accuracy beats chance (the long CPU run in train/
    shows accuracy far above chance; 60 steps on one core only start the climb)."""
    vals = [r for r in read_metrics(tiny_model) if "val_accuracy" in r]
    first, last = vals[0], vals[-1]
    assert last["step"] == 60
    assert first["val_loss"] - last["val_loss"] > 0.05, vals
    assert last["val_accuracy"] > last["chance"], vals
    assert latest_validation(tiny_model) == last


def test_saved_model_reloads_and_encodes_identically(tiny_model: Path, tmp_path: Path) -> None:
    sentences = [
        "It was a truth universally acknowledged.",
        "Emma smiled.",
        "Where is Mr. Knightley?",
    ]
    a = load_encoder(tiny_model, precision="fp32").encode(sentences)
    b = load_encoder(tiny_model, precision="fp32").encode(sentences)
    assert a.shape == (3, 128) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    # batch order and batch size do not change a sentence's vector
    c = load_encoder(tiny_model, precision="fp32").encode(sentences[::-1], batch_size=1)[::-1]
    np.testing.assert_allclose(a, c, atol=1e-5)
    unit = load_encoder(tiny_model).encode(sentences, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("encoder", ["bi", "bow", "mc"])
def test_every_encoder_trains_and_loads(encoder: str, shared_data: Path, tmp_path: Path) -> None:
    cfg = small_config(shared_data, tmp_path / encoder, encoder=encoder, max_steps=4)
    result = train(cfg)
    enc = load_encoder(tmp_path / encoder)
    dims = {"bi": 4 * 32, "bow": 2 * 16, "mc": 8 * 32}
    assert enc.dim == dims[encoder]
    assert enc.encode(["A sentence."]).shape == (1, dims[encoder])
    assert 0 <= result.last["val_accuracy"] <= 1


def test_resume_continues_exactly(shared_data: Path, tmp_path: Path) -> None:
    train(small_config(shared_data, tmp_path / "full"))
    train(small_config(shared_data, tmp_path / "split", max_steps=6))
    train(small_config(shared_data, tmp_path / "split"), resume=True)
    a = load_file(str(tmp_path / "full" / "weights.safetensors"))
    b = load_file(str(tmp_path / "split" / "weights.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    steps = [r["step"] for r in read_metrics(tmp_path / "split") if "loss" in r]
    assert steps == sorted(set(steps))  # no repeated log lines after the resume


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_ctrl_c_or_kill_saves_a_checkpoint_that_resumes(sig: int, shared_data: Path,
                                                        tmp_path: Path) -> None:
    out = tmp_path / "m"
    args = [
        "train",
        str(shared_data / BOOK),
        "--split-sentences",
        "--out",
        str(out),
        "--hidden",
        "32",
        "--word-dim",
        "16",
        "--vocab-size",
        "3000",
        "--batch-size",
        "64",
        "--max-steps",
        "100000",
        "--checkpoint-every",
        "100000",
        "-q",
    ]
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "cli.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "metrics.jsonl").exists():
        time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "--resume" in err
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["step"] >= 1
    assert load_encoder(out).encode(["Still usable."]).shape[0] == 1


def test_corpus_smaller_than_two_batches_is_refused(shared_data: Path, tmp_path: Path) -> None:
    small = tmp_path / "few.txt"
    small.write_text("One sentence.\nTwo sentences.\nThree.\n")
    with pytest.raises(InputError, match="at least 2 × batch size"):
        train(
            small_config(shared_data, tmp_path / "m", corpus=[str(small)], split_sentences=False),
        )


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--encoder", "lstm"),
        ("--context", "4"),
        ("--batch-size", "0"),
        ("--lr", "-1"),
        ("--device", "tpu"),
        ("--max-steps", "0"),
    ],
)
@pytest.mark.slow
def test_bad_option_values_give_one_line_and_exit_2(
    option: str, value: str, shared_data: Path, tmp_path: Path
) -> None:
    r = cli("train", str(shared_data / BOOK), "--out", str(tmp_path / "m"), option, value)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("qtsearch: error:")


@pytest.mark.slow
def test_bad_corpus_gives_one_line_and_exit_3(tmp_path: Path) -> None:
    binary = tmp_path / "blob.txt"
    binary.write_bytes(bytes(range(256)) * 64)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress(b"Hello there.\n" * 5000)[:100])
    for path in (tmp_path / "missing.txt", binary, empty, truncated, tmp_path):
        r = cli("train", str(path), "--out", str(tmp_path / "out"))
        assert r.returncode == 3, (path, r.stderr)
        assert "Traceback" not in r.stderr and str(path.name) in r.stderr
    assert not (tmp_path / "out" / "weights.safetensors").exists()


def test_info_json_reports_validation(tiny_model: Path) -> None:
    r = cli("info", str(tiny_model), "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["config"]["encoder"]["encoder"] == "uni"
    assert 0 < data["chance"] < data["val_accuracy"] <= 1


def test_options_are_checked_in_python_too(shared_data: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        train(small_config(shared_data, tmp_path / "m", context=2))


def test_help_shows_the_defaults_that_depend_on_the_encoder() -> None:
    """`--hidden`, `--warmup-steps` and `--lr-schedule` default by encoder: the help says how."""
    from typer.testing import CliRunner

    from qtsearch.app.cli import app

    r = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    for shown in ("[default: (1000; transformer 512)]", "[default: (0; transformer 1000)]",
                  "[default: (constant; transformer inverse-sqrt)]"):
        assert shown in text, shown
