"""qtsearch.core.progress: the silent base Reporter (notes to the log), and a reporter of a
script's own called by a real build for each stage."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import qtsearch
from qtsearch.core.progress import Reporter, Stage


class Recording(Reporter):
    """A script's own reporter: what a build tells it, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self.advanced: dict[str, float] = {}

    def __enter__(self) -> Recording:
        self.events.append(("enter",))
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append(("exit",))

    @contextlib.contextmanager
    def stage(self, name: str, total: float | None = None, unit: str = "",
              completed: float = 0, keep: bool = True) -> Iterator[Stage]:
        self.events.append(("stage", name, total, unit))
        self.advanced[name] = completed
        outer = self

        class Counting(Stage):
            def __call__(self, n: float) -> None:
                outer.advanced[name] += n

            def update(self, completed: float, info: str | None = None) -> None:
                outer.advanced[name] = completed

        yield Counting()
        self.events.append(("done", name))

    def note(self, text: str, warn: bool = False) -> None:
        self.events.append(("note", text, warn))


def test_the_base_reporter_draws_nothing_and_logs_notes(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="qtsearch"), Reporter() as reporter:
        with reporter.stage("embed", 10, "sentences") as advance:
            assert isinstance(advance, Stage)
            advance(3)
            advance.update(5, "half")
            advance.grow(2)
        reporter.note("read 10 sentences")
        reporter.note("3 empty lines", warn=True)
        reporter.status("12 it/s")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "read 10 sentences"), (logging.WARNING, "3 empty lines")]


def test_a_build_reports_each_stage_to_the_reporter_given(tmp_path: Path) -> None:
    texts = [f"Sentence number {i} is about the {w}." for i, w in
             enumerate(["sea", "hills", "rain", "town", "river", "garden"] * 3)]
    recording = Recording()
    with qtsearch.Index.build(texts, tmp_path / "idx", index="flat",
                              reporter=recording) as index:
        assert len(index) == len(texts)
    events = recording.events
    assert events[0] == ("enter",) and events[-1] == ("exit",)
    stages = [e[1] for e in events if e[0] == "stage"]
    assert stages[:1] == ["read"] and "embed" in stages and "metadata" in stages
    assert stages.index("embed") < stages.index("metadata")
    # every stage started is finished, in the same order
    assert [e[1] for e in events if e[0] == "done"] == stages
    embed = next(e for e in events if e[:2] == ("stage", "embed"))
    assert embed[2:] == (len(texts), "sentences")
    assert recording.advanced["embed"] == len(texts)
    assert recording.advanced["metadata"] == len(texts)
