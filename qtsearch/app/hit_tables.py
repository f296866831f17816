"""The tables a query prints, in the shell and from `qtsearch search`: ranked hits, why each
ranks where it does (`--explain`), and a sentence in its context; on a terminal as tables,
elsewhere as tab-separated lines a script can take apart."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from qtsearch.lifecycle.querying import Hit, Record

#: The mark of the sentence :ctx asked for: a character, so that it shows without colour too.
CENTRE_MARK = "▶"


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
    """One leg of one hit: its score, its rank among the leg's own candidates (where it has
    one) and, fused, its z-score and part of the fused score."""
    if leg is None or leg.get("score") is None:
        return "-"
    rank = leg.get("rank")
    filled = (rank is None and "rank" in leg) or leg.get("filled", False)
    text = f"{leg['score']:.3f}" + (" (filled in)" if filled
                                     else f" (#{rank})" if rank is not None else "")
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
    aligned = why.get("aligned")
    if aligned is not None:
        a = aligned["alignment_weight"]
        formula = (f"score = {1 - a:.2f} × z(first stage) + {a:.2f} × z(word alignment), "
                   f"each z over the re-scored hits; first stage: {formula}")
    weak = why.get("weak_below")
    return "; ".join(p for p in (
        formula, f"query terms: {', '.join(why['query_terms']) or 'none'}",
        f"composed words: {', '.join(why['composed']) or 'none'}",
        f"weak under cosine {weak:.2f}" if weak is not None else "") if p)


def show_explained(console: Console, explained: Sequence[dict[str, Any]]) -> None:
    """Why each hit ranks where it does: each leg's score and rank, z-score and part of the
    fused score (re-ranked: the first stage's score and the re-ranker's cosine, which the
    score fuses; re-scored by word alignment: the first stage's score and the alignment, with
    their z and parts), and the query terms it holds; then how the score is made."""
    reranked = explained[0].get("mode") == "rerank"
    aligned = "aligned" in explained[0]
    legs = ("first", "rerank") if reranked else ("semantic", "lexical")
    cell = _score_cell if reranked else _leg_cell
    rows = [(str(n), cell(why["legs"].get(legs[0])), cell(why["legs"].get(legs[1])),
             *((_leg_cell(why["aligned"]["first"]), _leg_cell(why["aligned"]["alignment"]))
               if aligned else ()),
             ", ".join(why["matched"]) + (" (weak)" if why["weak"] else "")
             + (" (fragment: ranked below sentences)" if why["fragment"] else ""))
            for n, why in enumerate(explained, 1)]
    if console.is_terminal:
        table = Table(title="why", title_justify="left", caption=how_fused(explained[0]),
                      caption_justify="left")
        heads = ("first stage", "re-ranker (cosine)") if reranked \
            else ("semantic (cosine)", "lexical (BM25)")
        if aligned:
            heads += ("first stage (fused)", "word alignment")
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
