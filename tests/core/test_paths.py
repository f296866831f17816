"""A self-contained package: one data-folder resolver honouring $QTSEARCH_DATA, package data
that a wheel carries, and no module reaching outside the package on its own."""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import small_yelp_data

from qtsearch.core.errors import InputError
from qtsearch.core.paths import CHECKOUT_DATA, DATA_ENV, PACKAGE, data_root
from qtsearch.encoders.base import DEFAULT_MODEL
from qtsearch.evaluation.analogy.build import DEFAULT_TUPLES

REPO = Path(__file__).resolve().parents[2]


def test_explicit_folder_then_environment_then_checkout(tmp_path, monkeypatch) -> None:
    (tmp_path / "env" / "yelp").mkdir(parents=True)
    (tmp_path / "flag").mkdir()
    monkeypatch.delenv(DATA_ENV, raising=False)
    assert data_root() == CHECKOUT_DATA  # a checkout finds ../shared/data beside it
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(need="yelp") == tmp_path / "env" / "yelp"
    assert data_root(tmp_path / "flag") == tmp_path / "flag"  # --data wins
    with pytest.raises(InputError, match=r"flag/sts: not found: the data folder .* has no sts/"):
        data_root(tmp_path / "flag", need="sts")
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "absent"))
    with pytest.raises(InputError, match=f"absent: data folder not found .*{DATA_ENV}"):
        data_root()


def test_package_data_covers_every_shipped_file() -> None:
    """What the package reads of its own is inside it and listed as package data."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    globs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["qtsearch"]
    shipped = [DEFAULT_TUPLES, DEFAULT_TUPLES.with_name("yelp_tuples.config.json"),
               *DEFAULT_MODEL.iterdir(), PACKAGE / "app" / "demo" / "wikitext2.txt.gz"]
    for path in shipped:
        relative = path.resolve().relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative
    recorded = json.loads(DEFAULT_TUPLES.with_name("yelp_tuples.config.json").read_text())
    assert recorded["config"]["out"] == "qtsearch/evaluation/analogy/tuples/yelp_tuples.jsonl"


PARENTS = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]|Path\(__file__\)"
                     r"((?:\.resolve\(\))?(?:\.parent)+)")


def test_no_module_climbs_out_of_the_package() -> None:
    """Only qtsearch/core/paths.py may name a folder outside the package (the checkout's data)."""
    for source in PACKAGE.rglob("*.py"):
        if source == PACKAGE / "core" / "paths.py":
            continue
        depth = len(source.relative_to(PACKAGE).parts) - 1  # folders below qtsearch/
        text = source.read_text(encoding="utf-8")
        for m in PARENTS.finditer(text):
            up = int(m.group(1)) + 1 if m.group(1) else m.group(2).count(".parent")
            assert up <= depth + 1, (source, m.group(0))
        assert "shared\" / \"data" not in text and "shared/data\"" not in text, source


def test_analogy_run_from_any_folder_reads_qtsearch_data(tiny_model, shared_data, tmp_path):
    """`bench analogy run` from a folder outside the checkout: the tuples come from the package,
    the Yelp sentences from $QTSEARCH_DATA (a small real subset, so its pool size shows it)."""
    data = small_yelp_data(shared_data, tmp_path / "data")
    env = {**os.environ, DATA_ENV: str(data), "QTSEARCH_CACHE": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "qtsearch.app.cli", "bench", "analogy", "run", "-m",
                        str(tiny_model), "--baselines", "none", "--device", "cpu", "--json"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert Path(report["tuples"]) == DEFAULT_TUPLES
    assert 3000 < report["pool"] < 6000  # the subset, not the 172,887 of ../shared/data
    assert report["models"][0]["overall"]["questions"] == 1240
