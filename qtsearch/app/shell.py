"""`qtsearch shell`: an interactive loop over one opened index, and the tables it prints.

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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from qtsearch.core.errors import QTSearchError, UsageError
from qtsearch.lifecycle.querying import (
    CONTEXT_WINDOW,
    MODES,
    UNITS,
    Explainer,
    Hit,
    Record,
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
#: The mark of the sentence :ctx asked for: a character, so that it shows without colour too.
CENTRE_MARK = "▶"

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


def _weak(hit: Hit, weak: float | None) -> bool:
    cosine = (hit.legs or {}).get("semantic")
    return weak is not None and cosine is not None and cosine < weak


def hits_table(hits: Sequence[Hit], title: str | None = None,
               weak: float | None = None) -> Table:
    """Ranked hits: rank, score, id, sentence, and where it came from; hits whose cosine is
    under `weak` (the model's weak-match threshold) dimmed."""
    dimmed = any(_weak(h, weak) for h in hits)
    table = Table(title=title, title_justify="left", expand=False, show_lines=False,
                  caption=f"dimmed: cosine under {weak:.2f}, a weak match" if dimmed else None,
                  caption_justify="left")
    table.add_column("#", justify="right", style="dim")
    table.add_column("score", justify="right")
    table.add_column("id", justify="right", style="cyan")
    table.add_column("sentence", overflow="fold")
    table.add_column("source", style="dim", overflow="fold")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), f"{h.score:.3f}", str(h.id), h.text, h.origin(),
                      style="dim" if _weak(h, weak) else None)
    return table


def within(reranker: Reranker | None, count: int) -> Reranker | None:
    """`reranker`, no deeper than an index of `count` sentences: its depth is an internal
    setting, not a k the user asked for, so a small index must not warn that it is too large
    (the loaded encoder is shared, nothing loads again)."""
    if reranker is None or reranker.depth <= count:
        return reranker
    return reranker.deeper(count)


def show_hits(console: Console, hits: Sequence[Hit], title: str | None = None,
              weak: float | None = None,
              explained: Sequence[dict[str, Any]] | None = None) -> None:
    """Ranked hits as a table on a terminal; elsewhere (a pipe, a log) one tab-separated line
    a hit, rank, score, id, sentence, source: a table there has no width to fit but Rich's 80
    columns, and would wrap each sentence over several lines that no script could take apart.
    `explained` (Explainer.explain of these hits): then why each ranks where it does."""
    if console.is_terminal:
        console.print(hits_table(hits, title, weak))
    else:
        lines = [title] if title is not None else []
        lines += [_plain((str(rank), f"{h.score:.3f}", str(h.id), h.text, h.origin()))
                  for rank, h in enumerate(hits, 1)]
        _write(console, lines)
    if explained:
        show_explained(console, explained)


def _plain(cells: Sequence[str]) -> str:
    return "\t".join(" ".join(c.split()) for c in cells)


def _write(console: Console, lines: list[str]) -> None:
    # written as they are: Rich would expand the tabs into spaces
    console.file.write("".join(f"{line}\n" for line in lines))
    console.file.flush()


def _score_cell(leg: dict[str, Any] | None) -> str:
    return "-" if leg is None or leg.get("score") is None else f"{leg['score']:.3f}"


def _leg_cell(leg: dict[str, Any] | None) -> str:
    """One leg of one hit: its score, its rank among the leg's own candidates and, fused,
    its z-score and part of the fused score."""
    if leg is None or leg.get("score") is None:
        return "-"
    rank = leg.get("rank")
    text = f"{leg['score']:.3f} ({f'#{rank}' if rank is not None else 'filled in'})"
    if "z" in leg:
        return f"{text} z {leg['z']:+.2f} → {leg['part']:+.3f}"
    return f"{text} → {leg['part']:.4f}" if "part" in leg else text


def how_fused(why: dict[str, Any]) -> str:
    """The line that says how a hit's score is made (the same for every hit of a query)."""
    w = why.get("lexical_weight")
    if why.get("fusion") == "convex" and w is not None:
        formula = (f"score = {1 - w:.2f} × z(cosine) + {w:.2f} × z(BM25), each leg's z over "
                   "this query's candidates")
    elif why.get("fusion") == "rrf":
        formula = "score = Σ 1 / (60 + rank) over the legs"
    elif why.get("mode") == "rerank" and why.get("rerank_weight", 1.0) < 1.0:
        r = why["rerank_weight"]
        formula = (f"score = {1 - r:.2f} × z(first stage) + {r:.2f} × z(re-ranker's cosine), "
                   "each z over this query's re-ranked hits")
    else:
        formula = {"semantic": "score = the cosine", "lexical": "score = BM25",
                   "rerank": "score = the re-ranker's cosine"}.get(why.get("mode") or "", "")
    weak = why.get("weak_below")
    return "; ".join(p for p in (
        formula, f"query terms: {', '.join(why['query_terms']) or 'none'}",
        f"composed words: {', '.join(why['composed']) or 'none'}",
        f"weak under cosine {weak:.2f}" if weak is not None else "") if p)


def show_explained(console: Console, explained: Sequence[dict[str, Any]]) -> None:
    """Why each hit ranks where it does: each leg's score and rank, z-score and part of the
    fused score (re-ranked: the first stage's score and the re-ranker's cosine, which the
    score fuses), and the query terms it holds; then how the score is made."""
    reranked = explained[0].get("mode") == "rerank"
    legs = ("first", "rerank") if reranked else ("semantic", "lexical")
    cell = _score_cell if reranked else _leg_cell
    rows = [(str(n), cell(why["legs"].get(legs[0])), cell(why["legs"].get(legs[1])),
             ", ".join(why["matched"]) + (" (weak)" if why["weak"] else "")
             + (" (fragment: ranked below sentences)" if why["fragment"] else ""))
            for n, why in enumerate(explained, 1)]
    if console.is_terminal:
        table = Table(title="why", title_justify="left", caption=how_fused(explained[0]),
                      caption_justify="left")
        heads = ("first stage", "re-ranker (cosine)") if reranked \
            else ("semantic (cosine)", "lexical (BM25)")
        for name in ("#", *heads, "matched terms"):
            table.add_column(name, justify="right" if name == "#" else "left", overflow="fold")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    _write(console, ["why", *(_plain(row) for row in rows), how_fused(explained[0])])


def context_table(records: Sequence[Record], center: int) -> Table:
    """A passage in document order, the sentence `center` marked and highlighted."""
    first = next((r for r in records if r.id == center), records[0])
    table = Table(title=f"{first.title or Path(first.source).name}, document {first.doc}",
                  title_justify="left", show_header=True)
    table.add_column("", justify="right", style="bold yellow")
    table.add_column("pos", justify="right", style="dim")
    table.add_column("id", justify="right", style="cyan")
    table.add_column("sentence", overflow="fold")
    for r in records:
        style = "bold yellow" if r.id == center else ""
        table.add_row(CENTRE_MARK if r.id == center else "", str(r.position), str(r.id),
                      Text(r.text, style=style))
    return table


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
