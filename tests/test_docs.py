"""The README stays a short user's guide, the documentation site's pages exist, the shipped model
has its card, and the package's comments say why rather than who or when."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from conftest import REPO

README = REPO / "README.md"
PACKAGE = REPO / "qtsearch"

#: History a user cannot act on: a work session by its number or place in time, an engineer by
#: letter, an issue by number, notes outside the repository. "sessions" of the interactive
#: shell (its history file) and "session" in code are not comments, or not history.
HISTORY = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\d+(?:st|nd|rd|th)|this|that|previous|next|earlier|later|last|same|one) session\b"
    r"|\bsession \d+\b"
    r"|\bengineers? [A-Z]\b"
    r"|shared/notes"
    r"|\bissues? #?\d+"
    r"|(?<![\w/])#\d{1,4}\b",
    re.IGNORECASE,
)


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    source = path.read_text(encoding="utf-8")
    found = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append((node.body[0].lineno, doc))
    return found


def _mkdocs_nav() -> list[str]:
    """The nav of mkdocs.yml, read without a YAML library: its `- Title: file.md` lines."""
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text[text.index("\nnav:"):]
    return re.findall(r"^\s+- (?:[^:\n]+: )?([\w./-]+\.md)\s*$", nav, re.M)


def test_readme_is_short() -> None:
    assert README.stat().st_size <= 15_000, f"README.md is {README.stat().st_size:,} bytes"


def test_readme_tells_no_history() -> None:
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"\b(?:sessions?|issues?)\b", text, re.IGNORECASE)


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (REPO / target).exists(), f"README links to a missing {target}"


def test_the_default_model_has_its_card() -> None:
    card = (PACKAGE / "default_model" / "README.md").read_text(encoding="utf-8")
    for section in ("## What it is", "## Data", "## Training command", "## Metrics", "## Limits"):
        assert section in card
    assert not re.search(r"\b(?:sessions?|issues?)\b", card, re.IGNORECASE)


def test_no_history_in_comments_or_docstrings() -> None:
    found = [f"{path.relative_to(REPO)}:{line}: {match.group(0)!r}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for line, text in _comments_and_docstrings(path)
             for match in HISTORY.finditer(text)]
    assert not found, "\n".join(found)


def test_the_history_pattern_catches_history_only() -> None:
    for history in ("measured in the ninth session", "engineer B: the lexical leg",
                    "see ../shared/notes/x.md", "as issue 17 found", "(#20)", "this session's VM"):
        assert HISTORY.search(history), history
    for fine in ("history from earlier sessions of the shell", "a session of training",
                 "ray-project/ray#53727", "colour #fff", "the engineering of the index"):
        assert not HISTORY.search(fine), fine


def test_every_nav_page_exists() -> None:
    pages = _mkdocs_nav()
    assert "index.md" in pages and "api.md" in pages
    for page in pages:
        assert (REPO / "docs" / page).is_file(), f"mkdocs.yml names a missing docs/{page}"
