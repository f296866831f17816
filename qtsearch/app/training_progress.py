"""What a training run shows on stderr: a bar on a terminal, plain lines in a log file.

A bar drawn to a file shows nothing until the end, so without a terminal the periodic training
figures are printed as lines instead. Notes (the data summary, each validation) are printed
either way. `quiet` shows nothing; errors leave their message as the only line (bars cleared).
Of the processes of a torchrun job, only the first shows anything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from qtsearch.training.distributed import env_rank

#: update(completed, info): moves a bar and sets its text (None keeps the text).
Update = Callable[[int, str | None], None]


class Display:
    def __init__(self, enabled: bool = True, console: Console | None = None):
        self.enabled = enabled and env_rank() == 0
        self.console = console or Console(stderr=True)

    def note(self, line: str) -> None:
        """A line worth keeping (data summary, validation)."""
        if self.enabled:
            self.console.print(line, highlight=False)

    def status(self, line: str) -> None:
        """Periodic figures: shown by the bar on a terminal, printed as a line otherwise."""
        if self.enabled and not self.console.is_terminal:
            self.console.print(line, highlight=False)

    @contextlib.contextmanager
    def bar(self, name: str, total: int | None = None, completed: int = 0) -> Iterator[Update]:
        """One progress bar for the duration of the block."""
        progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(),
            TextColumn("{task.completed:,.0f}"), TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(), TimeRemainingColumn(),
            console=self.console, disable=not self.enabled, transient=False,
        )
        with progress:
            task = progress.add_task(name, total=total, completed=completed, info="")
            try:
                yield lambda n, info: progress.update(
                    task, completed=n, **({} if info is None else {"info": info}))
            except BaseException:
                progress.remove_task(task)  # the error's message stays the one line
                raise
