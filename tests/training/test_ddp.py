"""Training on several processes (training/distributed.py) with gloo on the CPU: two processes
sharing a step's batches make the same step as one process computing them in turn, only the
first process writes, a run resumes on two processes or on one, Ctrl-C stops both at one step.

The two-process runs are real: `torchrun` (or `qtsearch … --nproc 2`, which starts the processes
itself) running the `qtsearch` command line, on 900 real sentences of *Emma*.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from qtsearch.app.cli import main
from qtsearch.app.launch import nproc_option
from qtsearch.core.errors import UsageError
from qtsearch.encoders.files import read_metrics
from qtsearch.training.configs import TrainConfig
from qtsearch.training.distributed import World
from qtsearch.training.loop import batch_seed
from qtsearch.training.trainer import text_loop, train

BOOK_2 = "0728-dickens-charles--a-tale-of-two-cities.txt.gz"
SNLI = "nli/ketm/data/snli/test.txt"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: Runs the command line (its arguments) with the writers of the model folder wrapped to note
#: which process called them, one line per call in $QT_TEST_WRITES.
DRIVER = """
import os, sys
from qtsearch.training import loop, metrics_log
def noted(name, original):
    def wrapper(*args, **kwargs):
        with open(os.environ["QT_TEST_WRITES"], "a") as fh:
            fh.write(f"{os.environ['RANK']} {name}\\n")
        return original(*args, **kwargs)
    return wrapper
loop.save_state = noted("checkpoint", loop.save_state)
loop.save_model = noted("model", loop.save_model)
metrics_log.MetricsLog.__call__ = noted("metrics", metrics_log.MetricsLog.__call__)
from qtsearch.app.cli import main
main(sys.argv[1:])
"""


@pytest.fixture(scope="module")
def emma(emma_lines: Path) -> Path:
    """900 sentences of Emma, one a line (conftest)."""
    return emma_lines


def qt_argv(corpus: Path, out: Path, steps: int, *more: str) -> list[str]:
    return ["train", str(corpus), "--out", str(out), "--hidden", "16", "--word-dim", "16",
            "--vocab-size", "2000", "--batch-size", "64", "--max-steps", str(steps),
            "--checkpoint-every", "2", "--val-every", "2", "--lr", "0.01",
            "--precision", "fp32", "--device", "cpu", "-q", *more]


def qt_config(corpus: Path, out: Path, steps: int, **kw) -> TrainConfig:
    """What `qt_argv` asks for, as a config (the one-process runs, in this process)."""
    base = dict(corpus=[str(corpus)], out=str(out), hidden=16, word_dim=16, vocab_size=2000,
                batch_size=64, max_steps=steps, checkpoint_every=2, val_every=2, lr=0.01,
                precision="fp32", device="cpu")
    return TrainConfig(**(base | kw))


def qtsearch(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "qtsearch", *argv], capture_output=True,
                       text=True, env=env or ENV, timeout=600)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def assert_same_weights(a_dir: Path, b_dir: Path, name: str = "weights.safetensors") -> None:
    """Equal within float tolerance (the all-reduce may add in another order)."""
    a, b = load_file(str(a_dir / name)), load_file(str(b_dir / name))
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


def validation(folder: Path) -> list[dict]:
    return [r for r in read_metrics(folder) if "val_loss" in r]


def test_each_process_takes_a_contiguous_share_of_the_steps_batches() -> None:
    shares = [list(World(r, 2).share(8, 4)) for r in range(2)]
    assert shares == [[8, 9], [10, 11]]
    assert [list(World(r, 4).share(0, 4)) for r in range(4)] == [[0], [1], [2], [3]]
    assert list(World().share(6, 3)) == [6, 7, 8]  # one process computes them all, in turn


def test_nproc_is_taken_off_a_training_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert nproc_option(["train", "a.txt", "--nproc", "2", "-q"]) == (2, ["train", "a.txt", "-q"])
    assert nproc_option(["train-nli", "--nproc=3", "x"]) == (3, ["train-nli", "x"])
    assert nproc_option(["search", "--nproc", "2"]) == (1, ["search", "--nproc", "2"])
    with pytest.raises(UsageError, match="--nproc must be a whole number"):
        nproc_option(["train", "--nproc", "two"])
    monkeypatch.setenv("WORLD_SIZE", "2")  # inside the job: its processes are the N
    assert nproc_option(["train", "--nproc", "2"]) == (1, ["train"])


def test_bad_nproc_is_one_line_and_exit_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main(["train", "a.txt", "-o", "m", "--nproc", "0"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "qtsearch: error: --nproc must be a whole number of processes ≥ 1, not '0'"]


@pytest.mark.slow
def test_two_torchrun_processes_make_one_process_step_and_only_the_first_writes(
        emma: Path, tmp_path: Path) -> None:
    """Global batch B = 2 blocks of 64 sentences: two processes (one block each, gradients
    all-reduced) equal one process with --batches-per-step 2, step by step."""
    driver, writes = tmp_path / "driver.py", tmp_path / "writes.txt"
    driver.write_text(DRIVER, encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(driver), *qt_argv(emma, tmp_path / "two", 4)],
        capture_output=True, text=True, env={**ENV, "QT_TEST_WRITES": str(writes)},
        timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("trained 4 steps") == 1  # the second process prints nothing
    calls = writes.read_text().split("\n")[:-1]
    assert {c.split()[0] for c in calls} == {"0"}
    assert calls.count("0 checkpoint") == 2 and calls.count("0 model") == 2  # steps 2 and 4

    one = train(qt_config(emma, tmp_path / "one", 4, batches_per_step=2))
    assert one.steps == 4
    assert_same_weights(tmp_path / "two", tmp_path / "one")
    two_rows, one_rows = read_metrics(tmp_path / "two"), read_metrics(tmp_path / "one")
    assert len(two_rows) == len(one_rows) == 3 + 1  # no line written twice
    for a, b in zip(two_rows, one_rows):
        a.pop("sentences_per_s", None), b.pop("sentences_per_s", None)
        assert a.keys() == b.keys() and a["step"] == b["step"]
        np.testing.assert_allclose([a[k] for k in sorted(a) if k != "task"],
                                   [b[k] for k in sorted(b) if k != "task"], rtol=1e-5)
    assert next(r for r in two_rows if "loss" in r)["batches"] == 8


def test_a_step_of_two_batches_takes_the_mean_of_their_gradients(emma: Path,
                                                                  tmp_path: Path) -> None:
    """What a step of global batch 2 × 64 is, on one process: blocks 0 and 1 at the same
    weights, their losses summed in the figures, their gradients averaged (then clipped)."""
    loop = text_loop(qt_config(emma, tmp_path / "m", 2, batches_per_step=2))
    task, losses, grads = loop.tasks[0], [], []
    for k in (0, 1):
        loop.optim.zero_grad(set_to_none=True)
        torch.manual_seed(batch_seed(0, 0, k))
        st = task.batch_loss(k)
        st.loss.backward()
        losses.append(float(st.loss.detach()))
        grads.append([p.grad.clone() for p in loop.params])
    assert losses[0] != pytest.approx(losses[1])
    mean = [(a + b) / 2 for a, b in zip(*grads)]
    norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g)
                                                       for g in mean])))
    scale = min(1.0, loop.cfg.clip_norm / (norm + 1e-6))
    (loss_sum, _, rows), stop = loop.train_step(0, 0, False)
    assert loss_sum == pytest.approx(sum(losses), rel=1e-6) and rows > 0 and not stop
    for p, g in zip(loop.params, mean):
        torch.testing.assert_close(p.grad, g * scale, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_a_two_process_run_resumes_on_two_processes_or_on_one(emma: Path,
                                                               tmp_path: Path) -> None:
    train(qt_config(emma, tmp_path / "whole", 6, batches_per_step=2))
    r = qtsearch(*qt_argv(emma, tmp_path / "two", 2), "--nproc", "2")
    assert r.returncode == 0, r.stderr
    for name in ("on-two", "on-one"):
        shutil.copytree(tmp_path / "two", tmp_path / name)
    r = qtsearch(*qt_argv(emma, tmp_path / "on-two", 6), "--resume", "--nproc", "2")
    assert r.returncode == 0, r.stderr
    # one process: the checkpoint's 2 batches per step, computed in turn
    assert train(qt_config(emma, tmp_path / "on-one", 6), resume=True).steps == 6
    for name in ("on-two", "on-one"):
        assert_same_weights(tmp_path / name, tmp_path / "whole")
        assert [r["step"] for r in validation(tmp_path / name)] == [0, 2, 4, 6]
        np.testing.assert_allclose([r["val_loss"] for r in validation(tmp_path / name)],
                                   [r["val_loss"] for r in validation(tmp_path / "whole")],
                                   rtol=1e-5)
    with pytest.raises(UsageError, match=r"--batches-per-step differs from the checkpoint "
                                         r"\(2 there, 1 now\)"):
        train(qt_config(emma, tmp_path / "two", 6, batches_per_step=1), resume=True)
    r = qtsearch(*qt_argv(emma, tmp_path / "two", 6), "--resume", "--nproc", "3")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "qtsearch: error: 2 batches per step cannot be shared by 3 processes: use a number of "
        "processes that divides --batches-per-step"]


@pytest.mark.slow
@pytest.mark.parametrize("objective", ["fastsent", "sdae"])
def test_every_objective_on_two_processes_equals_one(objective: str, emma: Path,
                                                     tmp_path: Path) -> None:
    """FastSent (its own vocabulary softmax) and the SDAE (noise drawn per batch) too."""
    more = ("--objective", objective, "--batch-size", "32")
    r = qtsearch(*qt_argv(emma, tmp_path / "two", 2, *more), "--nproc", "2")
    assert r.returncode == 0, r.stderr
    train(qt_config(emma, tmp_path / "one", 2, objective=objective, batch_size=32,
                    batches_per_step=2))
    assert_same_weights(tmp_path / "two", tmp_path / "one")


@pytest.mark.slow
def test_multitask_heads_and_dropout_on_two_processes_equal_one(shared_data: Path, emma: Path,
                                                                 tmp_path: Path) -> None:
    """QT with its context encoder, NLI with its dropout classifier, the teacher with its
    projection (its MiniLM vectors cached by process 0 first): steps of one task leave the
    others' heads without a gradient on both processes."""
    argv = ["train-multitask", str(emma), "--nli", str(shared_data / SNLI), "--hidden", "16",
            "--teacher", str(shared_data / "gutenberg" / BOOK_2), "--teacher-sentences", "300",
            "--teacher-batch-size", "32", "--teacher-val-batches", "2",
            "--teacher-cache", str(tmp_path / "teacher"),
            "--fc-dim", "16", "--glove-words", "1000", "--vocab-size", "1000",
            "--qt-batch-size", "32", "--batch-size", "32", "--max-steps", "6",
            "--schedule", "round-robin", "--val-every", "6", "--checkpoint-every", "6",
            "--precision", "fp32", "--device", "cpu", "-q"]
    r = qtsearch(*argv, "--out", str(tmp_path / "two"), "--nproc", "2")
    assert r.returncode == 0, r.stderr
    r = qtsearch(*argv, "--out", str(tmp_path / "one"), "--batches-per-step", "2")
    assert r.returncode == 0, r.stderr
    assert_same_weights(tmp_path / "two", tmp_path / "one")
    assert_same_weights(tmp_path / "two", tmp_path / "one", "heads.safetensors")


@pytest.mark.slow
def test_ctrl_c_stops_both_processes_at_one_step_with_a_checkpoint(emma: Path,
                                                                   tmp_path: Path) -> None:
    out = tmp_path / "m"
    argv = qt_argv(emma, out, 100_000)
    argv[argv.index("--checkpoint-every") + 1] = "100000"
    argv[argv.index("--val-every") + 1] = "100000"
    proc = subprocess.Popen([sys.executable, "-m", "qtsearch", *argv, "--nproc", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.monotonic() + 300
    while not any(r.get("step", 0) >= 3 for r in read_metrics(out)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("qtsearch: error: interrupted at step ")
    assert "Traceback" not in err
    step = json.loads((out / "checkpoint" / "state.json").read_text())["step"]
    assert step >= 3 and f"interrupted at step {step};" in err
    r = qtsearch(*qt_argv(emma, out, step + 2), "--resume", "--nproc", "2")
    assert r.returncode == 0, r.stderr
    assert f"trained {step + 2} steps" in r.stdout


@pytest.mark.slow
def test_an_input_error_on_two_processes_is_one_line(tmp_path: Path) -> None:
    """Process 0 fails building the data while the other waits for it: the other is ended,
    the user reads process 0's one line and its exit status."""
    tiny = tmp_path / "tiny.txt"
    tiny.write_text("One sentence.\nTwo sentences.\n", encoding="utf-8")
    r = qtsearch("train", str(tiny), "--out", str(tmp_path / "m"), "--nproc", "2", "-q")
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "qtsearch: error: the corpus has 2 sentences; training needs at least 2 × batch size "
        "(800): one batch to train on and one to validate. Use a larger corpus or a smaller "
        "--batch-size"]


@pytest.mark.slow
def test_pairs_with_hard_negatives_on_two_processes_equal_one(shared_data: Path,
                                                              tmp_path: Path) -> None:
    """The in-batch contrastive task: each process's batch is its own set of candidates."""
    argv = ["train-pairs", str(shared_data / "pairs/multi30k/val.1.en.gz"),
            str(shared_data / "nli/nli_datasets/snli/dev.csv"), "--data", str(shared_data),
            "--hidden", "16", "--glove-words", "1000", "--batch-size", "32", "--max-steps", "3",
            "--val-every", "3", "--checkpoint-every", "3", "--precision", "fp32",
            "--device", "cpu", "-q"]
    r = qtsearch(*argv, "--out", str(tmp_path / "two"), "--nproc", "2")
    assert r.returncode == 0, r.stderr
    r = qtsearch(*argv, "--out", str(tmp_path / "one"), "--batches-per-step", "2")
    assert r.returncode == 0, r.stderr
    assert_same_weights(tmp_path / "two", tmp_path / "one")
    two, one = validation(tmp_path / "two"), validation(tmp_path / "one")
    assert [r["step"] for r in two] == [r["step"] for r in one] == [0, 3]
    np.testing.assert_allclose([r["val_loss"] for r in two], [r["val_loss"] for r in one],
                               rtol=1e-5)
