"""Build progress on stderr: one rich bar per stage with counts, elapsed time and ETA, or
nothing (quiet), in which case warnings still reach the log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("qtsearch")


class Progress:
    """One rich progress bar per stage (on stderr); silent when disabled."""

    def __init__(self, enabled: bool, console: Any = None):
        self._bar = None
        if enabled:
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description:<9}"), BarColumn(), _count_column(),
                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                console=console, transient=False)

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._bar is not None:
            if exc_type is not None:  # leave the error as the last, single line
                for task in list(self._bar.task_ids):
                    self._bar.remove_task(task)
            self._bar.stop()

    @contextlib.contextmanager
    def stage(self, name: str, total: float | None, unit: str = "") -> Iterator[Bar]:
        if self._bar is None:
            yield Bar(None, None)
            return
        bar = Bar(self._bar, self._bar.add_task(name, total=total, unit=unit))
        yield bar
        bar.finish()

    def note(self, text: str, warn: bool = False) -> None:
        """A message above the bars; without bars (quiet), warnings still reach the log."""
        if self._bar is not None:
            self._bar.console.print(text, soft_wrap=True, highlight=False)  # one line each
        else:
            log.log(logging.WARNING if warn else logging.INFO, text)


class Bar:
    """A stage's bar: call it with a count to advance; `grow` raises the total."""

    def __init__(self, progress: Any, task: Any):
        self.progress, self.task = progress, task

    def __call__(self, n: float) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, n)

    def _task(self) -> Any:
        return next(t for t in self.progress.tasks if t.id == self.task)

    def grow(self, n: float) -> None:
        if self.progress is not None:
            self.progress.update(self.task, total=(self._task().total or 0) + n)

    def finish(self) -> None:
        """Show the stage as complete (totals of a stage are estimates)."""
        if self.progress is not None:
            task = self._task()
            self.progress.update(self.task, total=task.completed, completed=task.completed)


def _count_column() -> Any:
    from rich.progress import ProgressColumn
    from rich.text import Text

    class CountColumn(ProgressColumn):
        """done/total and the stage's unit (MB with one decimal)."""

        def render(self, task: Any) -> Text:
            unit = task.fields.get("unit", "")
            fmt = ",.1f" if unit == "MB" else ",.0f"
            done = format(task.completed, fmt)
            text = f"{done}/{format(task.total, fmt)}" if task.total is not None else done
            return Text(f"{text} {unit}")

    return CountColumn()
