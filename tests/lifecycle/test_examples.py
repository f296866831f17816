"""The Python examples of docs/api.md and of the README's Python section run as they stand,
in a folder holding a `notes.txt` of real text, and the API page shows every exported name."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO
from readme_commands import code_blocks

import qtsearch

API_PAGE = REPO / "docs" / "api.md"
#: Bytes of WikiText-2 (one paragraph a line) in the examples' notes.txt: ~60 passages.
NOTES_BYTES = 30_000


@pytest.fixture
def notes_folder(tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    text = (shared_data / "wikitext2" / "valid.txt").read_bytes()[:NOTES_BYTES]
    (tmp_path / "notes.txt").write_bytes(text[: text.rfind(b"\n") + 1])
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_examples(blocks: list[str], where: str) -> None:
    """The blocks in order in one namespace, as a reader pastes them one after another."""
    assert blocks, f"{where}: no python examples"
    code = compile("\n".join(blocks), where, "exec")
    exec(code, {"__name__": "__example__"})


@pytest.mark.slow  # two builds and five writes
def test_the_api_page_examples_run(notes_folder: Path) -> None:
    run_examples(code_blocks(API_PAGE, "python"), str(API_PAGE))
    assert (notes_folder / "indexes" / "notes" / "manifest.json").is_file()


def test_the_readme_python_example_runs(notes_folder: Path) -> None:
    blocks = code_blocks(REPO / "README.md", "python", "### Python")
    assert len(blocks) == 1
    run_examples(blocks, "README.md")
    with qtsearch.Index.open(notes_folder / "indexes" / "notes") as index:
        assert index.info()["added"] and index.info()["deleted"]  # it wrote, as it says


def test_the_api_page_shows_every_exported_name() -> None:
    code = "\n".join(code_blocks(API_PAGE, "python"))
    missing = [name for name in qtsearch.__all__ if f"qtsearch.{name}" not in code]
    assert not missing, f"docs/api.md has no example of {missing}"
