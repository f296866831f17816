"""`qtsearch shell`: an interactive loop over one opened index (its tables: hit_tables).

The model and index are loaded once; each line typed is then one query (a few milliseconds).
Line editing and history come from the standard library's readline; the history file is
`~/.qtsearch_history` unless `QTSEARCH_HISTORY` names another.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from qtsearch.app.hit_tables import context_table, show_hits
from qtsearch.core.errors import QTSearchError, UsageError
from qtsearch.lifecycle.querying import (
    CONTEXT_WINDOW,
    MODES,
    UNITS,
    Explainer,
    Reranker,
    Results,
    parse_where,
)
from qtsearch.search.defaults import RERANK_DEPTH, TOP_K

if TYPE_CHECKING:
    from qtsearch.lifecycle.facade import Index

PROMPT = "qtsearch> "
HISTORY_LENGTH = 2000
COMMANDS = (":analogy", ":k", ":ctx", ":id", ":mode", ":by", ":where", ":rerank", ":explain",
            ":help", ":quit")

HELP = """\
Type a sentence to search the stored sentences ({mode} search).

  :analogy A | B | C   sentences D such that A is to B as C is to D
  :id ID               neighbours of stored sentence ID
  :ctx ID [N]          sentence ID with N sentences around it in its document (default 2)
  :k N                 show N results (now {k})
  :mode NAME           hybrid, semantic (vectors) or lexical (BM25 over the words)
  :by UNIT             passage, or doc: one hit per document, by its best passage (now {by})
  :where COLUMN=VALUE  only sentences with this metadata (e.g. source=emma.txt, doc=3);
                       repeat to add one, :where alone clears them (now: {where})
  :rerank NAME [N]     re-score the first N (30) hits with encoder NAME (minilm: slower,
                       better); :rerank off stops (now: {rerank})
  :explain             show or hide why each hit ranks where it does (now {explain})
  :help                this text
  :quit                leave (or Ctrl-D); Ctrl-C cancels the line being typed

History is kept in {history}."""


def within(reranker: Reranker | None, count: int) -> Reranker | None:
    """`reranker`, no deeper than an index of `count` sentences: its depth is an internal
    setting, not a k the user asked for, so a small index must not warn that it is too large
    (the loaded encoder is shared, nothing loads again)."""
    if reranker is None or reranker.depth <= count:
        return reranker
    return reranker.deeper(count)


def history_path() -> Path:
    return Path(os.environ.get("QTSEARCH_HISTORY") or Path.home() / ".qtsearch_history")


class Shell:
    """Reads lines, runs them against `index`, prints tables. Errors print one line and the
    loop goes on; only Ctrl-D or :quit end it."""

    def __init__(self, index: Index, k: int = TOP_K, console: Console | None = None):
        self.index = index
        self.k = k
        self.mode = index.default_mode
        self.by = UNITS[0]
        self.where: dict[str, str] = {}
        self.rerank: Reranker | None = None
        self.explainer: Explainer | None = None  # set while :explain is on
        self.console = console or Console()
        self.history = history_path()
        self._start = time.perf_counter()

    # -- commands -----------------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        """Run one line; False when the user asked to leave."""
        line = line.strip()
        self._start = time.perf_counter()
        if not line:
            return True
        if not line.startswith(":"):
            self._show(self.index.search(line, self.k, self.mode, self.where,
                                         within(self.rerank, len(self.index)), self.by),
                       query=line)
            return True
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        if name in (":quit", ":q", ":exit"):
            return False
        if name == ":help":
            self.console.print(HELP.format(k=self.k, history=self.history, mode=self.mode,
                                           by=self.by, explain=self._explain_text(),
                                           where=self._where_text(), rerank=self._rerank_text()),
                               highlight=False, markup=False)
        elif name == ":k":
            self.k = _positive_int(rest, ":k N")
            self.console.print(f"k = {self.k}", highlight=False)
        elif name == ":analogy":
            parts = [p.strip() for p in rest.split("|")]
            if len(parts) != 3 or not all(parts):
                raise UsageError("usage: :analogy A | B | C  (three sentences separated by |)")
            hits = self.index.analogy(*parts, k=self.k)
            self._show(hits, f"{parts[0]} : {parts[1]} :: {parts[2]} : ?")
        elif name == ":id":
            (record,) = self.index.get([_id(rest, ":id ID")])
            hits = self.index.search_ids([record.id], self.k, where=self.where)[0]
            self._show(hits, f"neighbours of {record.id}: {record.text}")
        elif name == ":mode":
            if rest not in MODES:
                raise UsageError(f"usage: :mode NAME ({' | '.join(MODES)})")
            self.mode = self.index.resolve_mode(rest)  # refused if the index lacks it
            self.console.print(f"mode = {self.mode}", highlight=False)
        elif name == ":by":
            if rest not in UNITS:
                raise UsageError(f"usage: :by UNIT ({' | '.join(UNITS)})")
            self.by = rest
            self.console.print(f"by = {self.by}", highlight=False)
        elif name == ":rerank":
            args = rest.split()
            if not 1 <= len(args) <= 2:
                raise UsageError("usage: :rerank NAME [N] | :rerank off")
            if args == ["off"]:
                self.rerank = None
            else:
                depth = _positive_int(args[1], ":rerank NAME [N]") if len(args) == 2 \
                    else RERANK_DEPTH
                same = self.rerank is not None and self.rerank.name == args[0]
                # a new depth for the same encoder keeps it loaded (loading one takes seconds)
                self.rerank = self.rerank.deeper(depth) if same else Reranker(args[0], depth)
            self.console.print(f"rerank: {self._rerank_text()}", highlight=False)
        elif name == ":explain":
            if rest:
                raise UsageError("usage: :explain (toggles it)")
            self.explainer = None if self.explainer else self.index.explainer()
            self.console.print(f"explain: {self._explain_text()}", highlight=False)
        elif name == ":where":
            if not rest:
                self.where = {}
            else:
                added = {**self.where, **parse_where([rest])}
                self.index.filter_for(added)  # an unknown column is refused here
                self.where = added
            self.console.print(f"where: {self._where_text()}", highlight=False)
        elif name == ":ctx":
            args = rest.split()
            if not 1 <= len(args) <= 2:
                raise UsageError("usage: :ctx ID [N]")
            target = _id(args[0], ":ctx ID [N]")
            window = (_positive_int(args[1], ":ctx ID [N]") if len(args) == 2
                      else CONTEXT_WINDOW)
            self.console.print(context_table(self.index.context(target, window), target))
        else:
            raise UsageError(f"unknown command {name}; :help lists the commands")
        return True

    def _where_text(self) -> str:
        return " and ".join(f"{c}={v}" for c, v in self.where.items()) or "no filter"

    def _explain_text(self) -> str:
        return "on" if self.explainer else "off"

    def _rerank_text(self) -> str:
        r = self.rerank
        return f"{r.name}, first {r.depth} hits" if r else "off"

    def _show(self, hits: Results, title: str | None = None, query: str | None = None) -> None:
        ms = (time.perf_counter() - self._start) * 1000
        explained = (self.explainer.explain(query, hits)
                     if self.explainer and query is not None else None)
        show_hits(self.console, hits, title, self.index.weak_cosine, explained)
        self.console.print(f"[dim]{len(hits)} results in {ms:.1f} ms[/dim]")

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> int:
        """The interactive loop; returns the exit status (0)."""
        readline = _setup_readline(self.history)
        # Ctrl-C must cancel the line even when started with SIGINT ignored (nohup, `cmd &`)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.index.warm_up()
        self.console.print(f"ready: {self.index.describe()}. "
                           "Type a sentence, :help for commands, Ctrl-D to leave.",
                           highlight=False)
        try:
            while True:
                try:
                    line = input(PROMPT)
                except KeyboardInterrupt:  # cancel the line being typed, keep the shell
                    self.console.print("^C")
                    continue
                except EOFError:
                    self.console.print()
                    return 0
                try:
                    if not self.handle(line):
                        return 0
                except KeyboardInterrupt:
                    self.console.print("cancelled")
                except QTSearchError as e:
                    self.console.print(f"[red]error:[/red] {e}", highlight=False)
        finally:
            _save_history(readline, self.history, self.console)


def _positive_int(text: str, usage: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"usage: {usage} (N a whole number ≥ 1)") from None
    if n < 1:
        raise UsageError(f"usage: {usage} (N a whole number ≥ 1)")
    return n


def _id(text: str, usage: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"usage: {usage} (ID a sentence id, shown in the id column)") from None


def _setup_readline(history: Path):
    """Line editing, history from earlier sessions, and Tab completion of ':' commands.
    Returns the readline module, or None where the platform has none."""
    try:
        import readline
    except ImportError:
        return None
    readline.set_history_length(HISTORY_LENGTH)
    if history.is_file():
        # unreadable history is not worth refusing to start over; it is rewritten on exit
        with contextlib.suppress(OSError):
            readline.read_history_file(history)

    def complete(text: str, state: int) -> str | None:
        matches = [c for c in COMMANDS if c.startswith(text)] if text.startswith(":") else []
        return matches[state] if state < len(matches) else None

    readline.set_completer(complete)
    readline.set_completer_delims(" \t|")
    readline.parse_and_bind("tab: complete")
    return readline


def _save_history(readline, history: Path, console: Console) -> None:
    if readline is None:
        return
    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        readline.write_history_file(history)
    except OSError as e:
        console.print(f"[yellow]warning:[/yellow] history not saved to {history}: "
                      f"{e.strerror or e}", highlight=False)
