"""The README's quickstart commands, read where `.ci/run` and the tests both find them."""

from __future__ import annotations

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
