"""The command line's progress display: the library's `Reporter` drawn with Rich on stderr.

One bar per stage with its count, unit, a short text, elapsed time and ETA. A bar drawn to a
file shows nothing until the end, so without a terminal the periodic figures (`status`) are
printed as lines instead; notes are printed either way. Disabled (`--quiet`), only warnings
reach the log (and notes, at the info level). On an error the bars are cleared, so that its
message is the one line left.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from qtsearch.core.progress import Reporter, Stage


class _Count(ProgressColumn):
    """done/total and the stage's unit (MB with one decimal)."""

    def render(self, task: Any) -> Text:
        unit = task.fields.get("unit", "")
        fmt = ",.1f" if unit == "MB" else ",.0f"
        done = format(task.completed, fmt)
        text = f"{done}/{format(task.total, fmt)}" if task.total is not None else done
        return Text(f"{text} {unit}".rstrip())


class _Bar(Stage):
    def __init__(self, bars: Progress, task: TaskID):
        self.bars, self.task = bars, task

    def __call__(self, n: float) -> None:
        self.bars.advance(self.task, n)

    def update(self, completed: float, info: str | None = None) -> None:
        self.bars.update(self.task, completed=completed,
                         **({} if info is None else {"info": info}))

    def _task(self) -> Any:
        return next(t for t in self.bars.tasks if t.id == self.task)

    def grow(self, n: float) -> None:
        self.bars.update(self.task, total=(self._task().total or 0) + n)

    def finish(self) -> None:
        """Show the stage as complete at its count (its total was an estimate)."""
        done = self._task().completed
        self.bars.update(self.task, total=done, completed=done)


class RichReporter(Reporter):
    """Bars and lines on `console` (stderr by default); nothing but warnings when disabled."""

    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self._bars: Progress | None = None
        self._depth = 0

    def __enter__(self) -> RichReporter:
        if self.enabled:
            self._depth += 1
            if self._bars is None:
                self._bars = Progress(
                    TextColumn("{task.description:<9}"), BarColumn(), _Count(),
                    TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=self.console, transient=False)
                self._bars.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bars is None:
            return
        if exc_type is not None:  # leave the error as the last, single line
            for task in list(self._bars.task_ids):
                self._bars.remove_task(task)
        self._depth -= 1
        if self._depth == 0:
            self._bars.stop()
            self._bars = None

    @contextlib.contextmanager
    def stage(self, name: str, total: float | None = None, unit: str = "",
              completed: float = 0, keep: bool = True) -> Iterator[Stage]:
        if not self.enabled:
            yield Stage()
            return
        with self:  # a stage outside a `with reporter:` block draws its own bar
            assert self._bars is not None
            bar = _Bar(self._bars, self._bars.add_task(name, total=total, completed=completed,
                                                       unit=unit, info=""))
            yield bar
            if keep:
                bar.finish()
            else:
                self._bars.remove_task(bar.task)

    def note(self, text: str, warn: bool = False) -> None:
        if self.enabled:
            self.console.print(text, soft_wrap=True, highlight=False)  # one line each
        else:
            super().note(text, warn)

    def status(self, text: str) -> None:
        if self.enabled and not self.console.is_terminal:
            self.console.print(text, highlight=False)
