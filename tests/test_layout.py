"""The layout the *Layout* section of docs/architecture.md describes, checked on the source:
every room is in it, rooms follow the data flow, commands stay apart, faiss stays behind the
index seam, modules stay small."""

from __future__ import annotations

import re
from pathlib import Path

from qtsearch.core.paths import PACKAGE

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

#: Rooms in data-flow order (text → … → queries, then what uses them); a room may import only
#: rooms before it. Single modules come first: everything may use them.
ORDER = ["errors", "config", "paths", "device", "text", "models", "inference", "encode",
         "training", "index", "build", "query", "api", "ui", "serve", "evaluation", "demo",
         "commands", "cli"]
#: Command modules every command may import: shared output and options, not commands.
SHARED_COMMAND_MODULES = {"common", "train_options"}
IMPORT = re.compile(r"^\s*(?:from|import) qtsearch\.([\w.]+)", re.M)


def _modules() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))]


def _room(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def test_rooms_import_only_rooms_before_them() -> None:
    for path, text in _modules():
        room = _room(path)
        if room in ("__init__", "__main__"):
            continue  # the package's own facade re-exports api; `python -m qtsearch` runs cli
        assert room in ORDER, f"{path}: a new room: add it to ORDER and to docs/architecture.md"
        for target in IMPORT.findall(text):
            other = target.split(".")[0]
            if other != room:
                assert ORDER.index(other) < ORDER.index(room), f"{path} imports {target}"


def test_no_command_imports_another() -> None:
    for path, text in _modules():
        if _room(path) != "commands":
            continue
        for target in IMPORT.findall(text):
            if target.startswith("commands."):
                assert target.split(".")[1] in SHARED_COMMAND_MODULES, f"{path} imports {target}"


def test_faiss_only_behind_the_index_seam() -> None:
    for path, text in _modules():
        if _room(path) != "index":
            assert not re.search(r"^\s*(?:import|from) faiss\b", text, re.M), path


def test_no_module_over_400_lines() -> None:
    for path, text in _modules():
        assert len(text.splitlines()) <= 400, path


def test_the_architecture_page_lists_every_room() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):text.index("## Development")]
    listed = set(re.findall(r"^  (\w+/|\w+\.py) ", section, re.M))
    rooms = {p.name + ("/" if p.is_dir() else "") for p in PACKAGE.iterdir()
             if p.name not in ("__pycache__", "__init__.py")}
    assert listed == rooms
