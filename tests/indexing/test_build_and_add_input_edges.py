"""Input edges of `build-index` and `add`: `add` follows how the index was
built and says so; wrapped running text without --split-sentences gets a warning; the build
summary never cuts a phrase of its caption and says when its times include earlier runs."""

from __future__ import annotations

import gzip
import itertools

import pytest
from cli_helpers import run
from rich.console import Console

from qtsearch.app.commands.index import summary_table
from qtsearch.index import read_manifest
from qtsearch.index.manifest import Manifest, compose_manifest
from qtsearch.indexing.index_stage import IndexStage

EMMA = "gutenberg/0003-austen-jane--emma.txt.gz"


@pytest.fixture(scope="module")
def wrapped(shared_data, tmp_path_factory):
    """The first 400 lines of Emma as printed: paragraphs wrapped at ~70 columns."""
    with gzip.open(shared_data / EMMA, "rt", encoding="utf-8") as fh:
        lines = list(itertools.islice(fh, 400))
    path = tmp_path_factory.mktemp("wrapped") / "emma.txt"
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def one_a_line(shared_data, tmp_path_factory):
    """The same text one sentence a line (what the reader's splitter makes of it)."""
    from qtsearch.text.reader import read_sentences

    with gzip.open(shared_data / EMMA, "rt", encoding="utf-8") as fh:
        text = "".join(itertools.islice(fh, 400))
    src = tmp_path_factory.mktemp("src") / "emma.txt"
    src.write_text(text, encoding="utf-8")
    path = src.with_name("emma-lines.txt")
    path.write_text("\n".join(s.text for s in read_sentences([str(src)], split=True)) + "\n",
                    encoding="utf-8")
    return path


def _build(capsys, corpus, model, out, *extra):
    return run(capsys, "build-index", str(corpus), "--model", str(model), "--out", str(out),
               "--index", "flat", "--device", "cpu", *extra)


def test_wrapped_text_without_split_sentences_warns(wrapped, one_a_line, tiny_model,
                                                    tmp_path, capsys):
    code, _, err = _build(capsys, wrapped, tiny_model, tmp_path / "a", "-q")
    assert code == 0, err
    warning = [line for line in err.splitlines() if "mid-sentence" in line]
    assert len(warning) == 1 and "--split-sentences" in warning[0], err
    for corpus, options in ((wrapped, ["--split-sentences"]), (one_a_line, [])):
        out = tmp_path / f"b{len(options)}"
        code, _, err = _build(capsys, corpus, tiny_model, out, "-q", *options)
        assert code == 0 and "mid-sentence" not in err, err


def test_sentences_without_full_stops_do_not_warn(shared_data, tiny_model, tmp_path, capsys):
    """SICK's sentences, one a line, have no final full stop: that is not wrapped text."""
    rows = (shared_data / "sts/sick2014/SICK_trial.txt").read_text(encoding="utf-8")
    lines = [row.split("\t")[1] for row in rows.splitlines()[1:301]]
    assert sum(not line.endswith(".") for line in lines) > 250  # the premise holds
    corpus = tmp_path / "sick.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = _build(capsys, corpus, tiny_model, tmp_path / "c", "-q")
    assert code == 0 and "mid-sentence" not in err, err


def test_add_follows_the_index_and_says_so(wrapped, tiny_model, tmp_path, capsys):
    folder = tmp_path / "emma"
    code, _, err = _build(capsys, wrapped, tiny_model, folder, "--split-sentences", "-q")
    assert code == 0, err
    more = tmp_path / "more.txt"
    more.write_text("She walked to the village and\nbought some ribbon. Then she came home.\n",
                    encoding="utf-8")
    count = read_manifest(folder)["count"]
    code, out, err = run(capsys, "add", str(folder), str(more), "-q")
    assert code == 0, err
    assert err.strip().splitlines() == [
        "add: splitting running text into sentences, as this index was built "
        "(--no-split-sentences to change)"]
    assert "added 2 sentences" in out and read_manifest(folder)["count"] == count + 2
    # the same file again: only with --allow-duplicates (else skipped: indexing/test_writers.py)
    code, out, err = run(capsys, "add", str(folder), str(more), "--no-split-sentences",
                         "--allow-duplicates", "-q")
    assert code == 0 and "added 2 sentences" in out  # the two lines, as asked
    assert err.strip().splitlines() == [
        "add: one sentence per line (as asked; the index was built with --split-sentences)"]


def _lines(table, width=120) -> list[str]:
    console = Console(width=width, record=True)
    console.print(table)
    return [line.strip() for line in console.export_text().splitlines()]


def test_summary_caption_keeps_its_phrases_whole():
    manifest = Manifest.from_dict(compose_manifest(
        count=1_000_000, index_type="ivf-pq", dim=1200, metric="cosine", model={},
        index_key="IVF4096,PQ150x4fsr,Refine(SQfp16)", index_params={},
        stages={"read": 10.0, "embed": 170.0, "index": 40.0, "metadata": 8.0},
        build={"parallel_stages": True}, transform={"spec": "whiten:768"}))
    lines = _lines(summary_table(manifest, 2_345_000_000, resumed=True))
    for phrase in ("ivf-pq (IVF4096,PQ150x4fsr,Refine(SQfp16))", "dim 1200, fit whiten:768",
                   "2.3 GB on disk", "times include earlier, interrupted runs"):
        assert phrase in lines
    assert any("total (index ∥ metadata, all runs)" in line for line in lines)
    lines = _lines(summary_table(manifest, 2_345_000_000))
    assert not any("earlier" in line or "all runs" in line for line in lines)


def test_resumed_build_says_its_total_includes_earlier_runs(one_a_line, tiny_model, tmp_path,
                                                            capsys, monkeypatch):
    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(IndexStage, "run", stop)
    code, _, err = _build(capsys, one_a_line, tiny_model, tmp_path / "x", "-q")
    assert code == 130 and "run the same command again" in err
    monkeypatch.undo()
    code, out, err = _build(capsys, one_a_line, tiny_model, tmp_path / "x")
    assert code == 0, err
    assert "resuming" in err and "total (all runs)" in out
    assert "times include earlier, interrupted runs" in out
