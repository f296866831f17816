"""Loading never executes code: a malicious pickle planted where qtsearch expects a model file,
a checkpoint, a faiss index or a metadata database is refused with one clear line, and the
code inside it never runs (its marker file is never created). The package's source is also
checked for the calls that would unpickle: pickle.load(s), torch.load without
weights_only=True, np.load with allow_pickle=True.
"""

from __future__ import annotations

import ast
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "qtsearch"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class Exploit:
    """Unpickling this runs os.system(...), which creates the marker file."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant(path: Path, marker: Path) -> None:
    """Replace `path` with a pickle whose loading would create `marker` (checked to work)."""
    payload = pickle.dumps(Exploit(marker))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(payload)


def test_the_exploit_is_real(tmp_path):
    """The planted payload does run code when unpickled: the tests below are meaningful."""
    marker = tmp_path / "pwned"
    plant(tmp_path / "p.pkl", marker)
    pickle.loads((tmp_path / "p.pkl").read_bytes())
    assert marker.exists()


def cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "cli.py"), *argv], capture_output=True,
                          text=True, env=ENV, timeout=600)


def assert_refused(r: subprocess.CompletedProcess, code: int, name: str, marker: Path) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("qtsearch: error: ") and name in lines[0]
    assert "Traceback" not in r.stderr
    assert not marker.exists(), "the planted pickle was executed"


@pytest.fixture(scope="module")
def small_index(tiny_model, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("untrusted")
    corpus = folder / "c.txt"
    corpus.write_text("Emma was very happy.\nMr. Knightley came to dinner.\n\n"
                      "Harriet walked to the village.\n", encoding="utf-8")
    r = cli("build-index", str(corpus), "--model", str(tiny_model), "--out",
            str(folder / "index"), "--index", "flat", "-q")
    assert r.returncode == 0, r.stderr
    return folder / "index"


@pytest.mark.slow
def test_pickle_as_model_weights_is_refused(tiny_model, small_index, tmp_path):
    """weights.safetensors replaced by a pickle: loading the model for indexing and for
    querying (the index records the model's path) is refused, nothing runs."""
    marker = tmp_path / "pwned"
    model = tmp_path / "model"
    shutil.copytree(tiny_model, model, ignore=shutil.ignore_patterns("cache", "checkpoint"))
    plant(model / "weights.safetensors", marker)
    r = cli("build-index", str(small_index.parent / "c.txt"), "--model", str(model),
            "--out", str(tmp_path / "i"))
    assert_refused(r, 4, "weights.safetensors", marker)
    assert not (tmp_path / "i").exists()
    r = cli("search", str(small_index), "Emma was happy.", "--model", str(model))
    assert_refused(r, 4, "weights.safetensors", marker)


@pytest.mark.slow
def test_pickle_as_checkpoint_is_refused_by_resume(shared_data, tmp_path):
    """checkpoint/state.safetensors replaced by a pickle: `train --resume` refuses it."""
    marker = tmp_path / "pwned"
    out = tmp_path / "m"
    argv = ["train", str(shared_data / "gutenberg/0003-austen-jane--emma.txt.gz"),
            "--split-sentences", "--out", str(out), "--hidden", "16", "--word-dim", "16",
            "--vocab-size", "2000", "--batch-size", "64", "--max-steps", "2",
            "--checkpoint-every", "1", "--val-every", "2", "-q"]
    r = cli(*argv)
    assert r.returncode == 0, r.stderr
    weights = (out / "weights.safetensors").read_bytes()
    plant(out / "checkpoint" / "state.safetensors", marker)
    r = cli(*argv, "--max-steps", "4", "--resume")
    assert_refused(r, 4, "corrupt checkpoint", marker)
    assert (out / "weights.safetensors").read_bytes() == weights  # the model is untouched


@pytest.mark.parametrize("name", ["index.faiss", "meta.sqlite"])
@pytest.mark.slow
def test_pickle_in_an_index_is_refused(name, small_index, tmp_path):
    marker = tmp_path / "pwned"
    index = tmp_path / "index"
    shutil.copytree(small_index, index)
    plant(index / name, marker)
    r = cli("search", str(index), "Emma was happy.")
    assert_refused(r, 5, name, marker)
    more = tmp_path / "more.txt"
    more.write_text("Another sentence.\n", encoding="utf-8")
    r = cli("add", str(index), str(more))
    assert_refused(r, 5, name, marker)


# ---------------------------------------------------------------------------------------------
# The source never unpickles


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node, ast.unparse(node.func)


def unsafe_loads(source: str) -> list[str]:
    """Calls in `source` that would unpickle data."""
    found = []
    for call, name in _calls(ast.parse(source)):
        kw = {k.arg: k.value for k in call.keywords}
        if name.split(".")[-1] in ("load", "loads") and name.split(".")[0] in (
                "pickle", "cPickle", "dill", "joblib", "cloudpickle", "_pickle"):
            found.append(ast.unparse(call))
        elif name.endswith("torch.load") or (name == "load" and "weights_only" in kw):
            value = kw.get("weights_only")
            if not (isinstance(value, ast.Constant) and value.value is True):
                found.append(ast.unparse(call))
        elif name in ("np.load", "numpy.load"):
            value = kw.get("allow_pickle")
            if value is not None and not (isinstance(value, ast.Constant) and not value.value):
                found.append(ast.unparse(call))
        elif name in ("pd.read_pickle", "pandas.read_pickle", "Unpickler"):
            found.append(ast.unparse(call))
    return found


def test_the_checker_finds_unsafe_calls():
    bad = ("import pickle, torch, numpy as np\n"
           "pickle.load(f)\npickle.loads(b)\ntorch.load(p)\ntorch.load(p, weights_only=False)\n"
           "np.load(p, allow_pickle=True)\n")
    assert len(unsafe_loads(bad)) == 5
    good = "torch.load(p, weights_only=True)\nnp.load(p)\nnp.load(p, allow_pickle=False)\n"
    assert unsafe_loads(good) == []


def test_the_package_never_unpickles():
    offenders = {str(p.relative_to(REPO)): unsafe_loads(p.read_text(encoding="utf-8"))
                 for p in sorted(PACKAGE.rglob("*.py"))}
    assert {k: v for k, v in offenders.items() if v} == {}
    imports = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")
               if any(isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                   (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".")[0]
                   in ("pickle", "dill", "cloudpickle") for a in n.names)
                   for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))]
    assert imports == []


def _poison(model: Path) -> None:
    """One NaN in the model's first floating-point tensor, rewritten as safetensors."""
    from safetensors.numpy import load_file, save_file

    path = model / "weights.safetensors"
    tensors = load_file(str(path))
    name = next(k for k, v in tensors.items() if v.dtype.kind == "f")
    tensors[name].reshape(-1)[0] = float("nan")
    save_file(tensors, str(path), {"format": "qtsearch-model"})


@pytest.mark.parametrize("kind", ["mean", "gru"])
def test_a_model_with_nan_weights_is_refused_at_load(kind, tiny_model, small_index, tmp_path):
    """Every vector of such a model is NaN: an index built with it would answer nothing."""
    from qtsearch.encoders.base import DEFAULT_MODEL

    source = DEFAULT_MODEL if kind == "mean" else tiny_model
    model = tmp_path / "model"
    shutil.copytree(source, model, ignore=shutil.ignore_patterns("cache", "checkpoint"))
    _poison(model)
    r = cli("build-index", str(small_index.parent / "c.txt"), "--model", str(model),
            "--out", str(tmp_path / "i"))
    assert_refused(r, 4, "not finite numbers", tmp_path / "never")
    assert not (tmp_path / "i").exists()
