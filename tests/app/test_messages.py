"""What the command line says matches what it does: every bracket of the help texts shown,
`--version`, `info` naming files as they are on disk, `add` naming the format it read, piped
hits one line each, a small index re-ranked without a warning about a k nobody asked for."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import typer
from cli_helpers import cli, run, sentences

from qtsearch.app.cli import app
from qtsearch.core.version import __version__
from qtsearch.encoders.files import DEFAULT_MODEL, read_config

#: The sentences of the small index (a tiny index: k and the re-ranking depth exceed it).
SIZE = 19


@pytest.fixture(scope="module")
def small(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of SIZE Melville sentences, built with the shipped model from a file whose
    name has underscores (as the index's own files do)."""
    folder = tmp_path_factory.mktemp("messages")
    corpus = sentences(shared_data, 0, SIZE, folder, "small_notes.txt")
    r = cli("build-index", str(corpus), "--out", str(folder / "idx"), "-q")
    assert r.returncode == 0, r.stderr
    return folder / "idx"


def _commands(command, path: tuple[str, ...] = ()):
    """(argv, command) of the group and every command under it, hidden ones left out."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        if not sub.hidden:
            yield from _commands(sub, (*path, name))


def _squeezed(text: str) -> str:
    """Text without whitespace: a help line may wrap anywhere, a hyphen included."""
    return re.sub(r"\s+", "", text)


def test_no_bracketed_word_of_a_help_text_is_lost(capsys) -> None:
    """Rich markup took "[encoders]" for a tag and printed "needs the  extra"."""
    checked = 0
    for path, command in _commands(typer.main.get_command(app)):
        code, out, err = run(capsys, *path, "--help")
        assert code == 0, (path, err)
        shown = _squeezed(out)
        helps = [command.help or ""] + [p.help or "" for p in command.params
                                        if not getattr(p, "hidden", False)]
        for bracketed in (b for h in helps for b in re.findall(r"\[[^\]\n]*\]", h)):
            assert _squeezed(bracketed) in shown, (path, bracketed)
            checked += 1
    assert checked >= 10  # [encoders], [ray], [plot], [.gz], [N], … are there to be checked


def test_version_names_the_shipped_model_as_an_index_records_it(small: Path) -> None:
    r = cli("--version")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    fingerprint = json.loads(cli("info", str(small), "--json").stdout)["model"]["fingerprint"]
    assert r.stdout == f"qtsearch {__version__} (shipped model {fingerprint})\n"


def test_info_names_files_as_they_are_on_disk(small: Path) -> None:
    on_disk = {p.relative_to(small).as_posix() for p in small.rglob("*") if p.is_file()}
    data = json.loads(cli("info", str(small), "--json").stdout)
    assert set(data["files"]) == on_disk - {"manifest.json"}  # --json: every file, by name
    assert any("_" in name for name in data["files"])  # the case at stake

    r = cli("info", str(small))
    assert r.returncode == 0, r.stderr
    assert not re.search(r"\b[0-9a-f]{64}\b", r.stdout)  # no checksums in the summary
    text = " ".join(r.stdout.split())
    assert f"files {len(data['files'])} files," in text  # counted, as the help says
    corpus = data["corpus"][0]["path"]
    assert "_" in Path(corpus).name and "corpus 1 file, " in text and f": {corpus}" in text
    for name in on_disk:  # no name shown with its underscores turned into spaces
        assert "_" not in name or name.replace("_", " ") not in r.stdout, name


def test_add_names_the_format_it_read_and_counts_in_the_singular(small: Path,
                                                                 tmp_path: Path) -> None:
    folder = tmp_path / "idx"
    shutil.copytree(small, folder)
    records = tmp_path / "more_records.jsonl"
    records.write_text(json.dumps({"_id": "r1", "title": "Ships",
                                   "text": "The whaler sailed from Nantucket in the spring."})
                       + "\n", encoding="utf-8")
    r = cli("add", str(folder), str(records), "-q")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == ("add: records, in passages of up to 200 words as this index "
                                "was built")
    assert r.stdout.startswith("added 1 sentence in ") and f"now holds {SIZE + 1}" in r.stdout

    lines = tmp_path / "more.txt"
    lines.write_text("A second line of plain text.\nAnd a third one.\n", encoding="utf-8")
    r = cli("add", str(folder), str(lines), "-q")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == ("add: one sentence per line, as this index was built "
                                "(--split-sentences to change)")
    assert r.stdout.startswith("added 2 sentences in ")


def test_piped_search_prints_one_line_a_hit(small: Path) -> None:
    queries = ["The lawyer hired a new copyist.", "He preferred not to."]
    r = cli("search", str(small), *queries, "-k", "3")
    assert r.returncode == 0, r.stderr
    answers = json.loads(cli("search", str(small), *queries, "-k", "3", "--json").stdout)
    expected = []
    for answer in answers:
        expected.append(answer["query"])
        expected += [f"{rank}\t{h['score']:.3f}\t{h['id']}\t{h['text']}\t"
                     f"{Path(h['source']).name}:{h['line']}"
                     for rank, h in enumerate(answer["hits"], 1)]
    assert r.stdout.splitlines() == expected
    assert len(expected) == len(queries) * 4  # the query, then its 3 hits


def test_build_index_help_says_the_models_fit_wins(capsys) -> None:
    code, out, _ = run(capsys, "build-index", "--help")
    text = " ".join(out.split())
    fit = read_config(DEFAULT_MODEL)["search"]["fit"]
    assert code == 0 and "auto: the model's own setting where its folder names one" in text
    assert f"the shipped model: {fit})" in text


def test_serve_help_lists_every_writing_endpoint(small: Path, capsys) -> None:
    pytest.importorskip("fastapi")
    from qtsearch.app.serve.app import ServeConfig, create_app
    from qtsearch.app.serve.request_limits import Limits

    served = create_app(ServeConfig(str(small), "cpu", None, Limits()))
    posts = {r.path for r in served.routes if "POST" in getattr(r, "methods", ())}
    assert {"/add", "/delete"} <= posts
    _code, out, _ = run(capsys, "serve", "--help")
    text = " ".join(out.split())
    for path in posts - {"/search"}:  # /search is listed as GET/POST /search
        assert f"POST {path}" in text, path
    assert "GET/POST /search" in text


@pytest.mark.slow
def test_rerank_on_a_small_index_warns_only_about_the_users_k(small: Path) -> None:
    pytest.importorskip("sentence_transformers")
    r = cli("search", str(small), "He preferred not to.", "--rerank", "minilm", "-k", "2",
            "--json")
    assert r.returncode == 0, r.stderr
    assert "larger than the index" not in r.stderr, r.stderr  # the depth, 30, is not k
    assert len(json.loads(r.stdout)[0]["hits"]) == 2
    r = cli("search", str(small), "He preferred not to.", "--rerank", "minilm", "-k", "50",
            "--json")
    assert r.returncode == 0, r.stderr
    assert f"k=50 is larger than the index ({SIZE} sentences)" in r.stderr
    assert len(json.loads(r.stdout)[0]["hits"]) == SIZE
