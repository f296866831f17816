"""The README's quickstart commands, read where `.ci/run` and the tests both find them, and
the code blocks of a Markdown page (what the example tests run)."""

from __future__ import annotations

import re
from pathlib import Path

#: The line after this marker's ```bash fence is the test command `.ci/run` runs.
TEST_MARKER = "<!-- test-command -->"


def readme_test_command(readme: Path) -> str:
    """The README's test command: the first line of the code block after TEST_MARKER."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    start = lines.index(TEST_MARKER)
    if not lines[start + 1].startswith("```"):
        raise ValueError(f"{readme}: no code block right after {TEST_MARKER}")
    return lines[start + 2].strip()


def code_blocks(page: Path, language: str, section: str | None = None) -> list[str]:
    """The code of every ```language block of a Markdown page, in order; `section`: only
    those under that heading (up to the next heading of its level or above)."""
    text = page.read_text(encoding="utf-8")
    if section is not None:
        start = text.index(section + "\n")
        level = section.split(" ", 1)[0]
        ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", text, re.M)
                if m.start() > start]
        text = text[start:ends[0] if ends else len(text)]
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)
