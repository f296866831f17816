"""Training curves: redrawn beside metrics.jsonl at each validation of every objective, drawn on
demand by `qtsearch info --plot`, and one line instead of a picture without matplotlib."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from qtsearch.app.cli import main
from qtsearch.encoders.files import read_metrics
from qtsearch.training import metrics_log
from qtsearch.training.configs import MultitaskConfig
from qtsearch.training.multitask import train_multitask
from qtsearch.training.plots import CURVES, MISSING, task_curves

BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"
SNLI = "nli/ketm/data/snli/test.txt"
#: Prepended to a child's script: `import matplotlib` then raises ImportError.
NO_MATPLOTLIB = "import sys\nsys.modules['matplotlib'] = None\n"


def png_size(path: Path) -> tuple[int, int]:
    """The size of a PNG that decodes completely (a cut or corrupt file raises)."""
    with Image.open(path) as im:
        assert im.format == "PNG"
        im.load()
        return im.size


def test_a_training_run_leaves_its_curves_beside_the_metrics(tiny_model: Path) -> None:
    width, height = png_size(tiny_model / CURVES)
    assert width > 400 and height > 150
    (qt,) = task_curves(read_metrics(tiny_model))
    assert qt.name == "qt" and len(qt.val_metric) == len(qt.chance) == 3  # steps 0, 30, 60
    assert qt.loss and qt.val_metric[-1][1] > qt.chance[-1][1]  # above chance by the end


@pytest.mark.slow
def test_multitask_redraws_one_row_per_task_at_each_validation(
        shared_data: Path, tmp_path: Path, tiny_model: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []

    def counted(folder: Path) -> Path:
        drawn.append(len(read_metrics(folder)))
        return real(folder)

    real = metrics_log.plot_folder
    monkeypatch.setattr(metrics_log, "plot_folder", counted)
    config = MultitaskConfig(
        corpus=[str(shared_data / BOOK)], split_sentences=True, train=[str(shared_data / SNLI)],
        out=str(tmp_path), hidden=16, fc_dim=16, glove_words=500, vocab_size=2000,
        qt_batch_size=32, batch_size=32, qt_val_blocks=2, max_steps=10, val_every=5,
        checkpoint_every=10, log_every=5,
    )
    train_multitask(config)
    rows = read_metrics(tmp_path)
    validations = [r["step"] for r in rows if "val_loss" in r]
    assert validations == [0, 5, 10] and len(drawn) == 3 and drawn[-1] == len(rows)
    curves = task_curves(rows)
    assert [c.name for c in curves] == ["nli", "qt"]
    assert all(len(c.val_metric) == len(c.chance) == 3 and c.loss for c in curves)
    # two rows of panels: taller than the one-task picture, as wide
    (w2, h2), (w1, h1) = png_size(tmp_path / CURVES), png_size(tiny_model / CURVES)
    assert w2 == w1 and h2 > 1.5 * h1


def test_info_plot_draws_on_demand(tiny_model: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model, ignore=shutil.ignore_patterns("checkpoint", "cache"))
    (model / CURVES).unlink()
    before = sorted(p.name for p in model.iterdir())
    with pytest.raises(SystemExit) as exc:
        main(["info", str(model), "--json", "--plot-to", str(tmp_path / "elsewhere.png")])
    assert exc.value.code in (0, None)
    assert json.loads(capsys.readouterr().out)["training_curves"].endswith("elsewhere.png")
    assert sorted(p.name for p in model.iterdir()) == before  # the folder left untouched
    png_size(tmp_path / "elsewhere.png")
    with pytest.raises(SystemExit) as exc:
        main(["info", str(model), "--plot"])
    assert exc.value.code in (0, None) and "training curves" in capsys.readouterr().out
    assert png_size(model / CURVES) == png_size(tmp_path / "elsewhere.png")
    with pytest.raises(SystemExit) as exc:
        main(["info", str(model), "--plot-to", str(tmp_path / "no" / "such" / "x.png")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 6 and len(err) == 1 and err[0].startswith("qtsearch: error: ")


def run_without_matplotlib(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_MATPLOTLIB + script], capture_output=True,
                          text=True, cwd=tmp_path, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_without_matplotlib_training_says_so_once_and_info_fails_in_one_line(
        shared_data: Path, tmp_path: Path) -> None:
    train = f"""
from qtsearch.app.progress_bars import RichReporter
from qtsearch.training.configs import TrainConfig
from qtsearch.training.trainer import train
train(TrainConfig(corpus=[{str(shared_data / BOOK)!r}], out="model", encoder="uni", hidden=16,
      word_dim=16, vocab_size=2000, batch_size=50, max_steps=10, split_sentences=True,
      val_every=5, checkpoint_every=10), reporter=RichReporter())
"""
    r = run_without_matplotlib(train, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(MISSING) == 1 and f"qtsearch: {MISSING}" in r.stderr.splitlines()
    model = tmp_path / "model"
    assert len([x for x in read_metrics(model) if "val_loss" in x]) == 3
    assert not (model / CURVES).exists()
    r = run_without_matplotlib(
        "from qtsearch.app.cli import main\nmain(['info', 'model', '--plot'])", tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == f"qtsearch: error: {MISSING}"
