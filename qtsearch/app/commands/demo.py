"""`qtsearch demo`: index the bundled demo corpus with the shipped model and search it."""

from __future__ import annotations

from pathlib import Path

import typer

from qtsearch.app.commands.common import counted, err, out, top_k_option


def demo(
    out_dir: Path = typer.Option(Path("indexes/demo"), "--out", "-o",
                                 help="Where to build the index."),
    k: int = top_k_option(5),
) -> None:
    """Build an index over the bundled WikiText-2 demo articles (once) and show real searches.

    Build progress goes to stderr and the results to stdout, so `qtsearch demo | head` ends
    quietly with a finished index, never a half-written one.
    """
    from qtsearch.app.demo import ANALOGY, ANALOGY_NOTE, QUERIES, ensure_demo_index
    from qtsearch.app.hit_tables import show_hits
    from qtsearch.app.progress_bars import RichReporter
    from qtsearch.lifecycle.facade import Index

    path = ensure_demo_index(out_dir, RichReporter(True, err))
    index = Index.open(path, device="cpu")
    err.print(f"[dim]index {path}: {counted(len(index), 'sentence')}[/dim]")
    for query, hits in zip(QUERIES, index.search_many(QUERIES, k), strict=True):
        show_hits(out, hits, f"search: {query}")
    a, b, c = ANALOGY
    show_hits(out, index.analogy(a, b, c, k), f"analogy: {a} : {b} :: {c} : ?")
    out.print(f"[dim]{ANALOGY_NOTE}[/dim]", highlight=False, soft_wrap=True)
    out.print(f"\nNext: qtsearch shell {path}    (type a sentence; :help lists commands)")


def register(app: typer.Typer) -> None:
    app.command()(demo)
