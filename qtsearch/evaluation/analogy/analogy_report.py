"""Tables of analogy results in the layout of the paper's Table 6: categories down, models across.

`table_rows` gives the cells (shared by the CLI's Rich table and the Markdown report).
"""

from __future__ import annotations

from collections.abc import Sequence

from qtsearch.evaluation.analogy.analogy_run import ModelResult, category_order
from qtsearch.evaluation.analogy.metrics import MODES

METRICS = ("top1", "top5", "mrr")


def table_rows(results: Sequence[ModelResult], metric: str = "top1",
               mode: str = "excluding") -> tuple[list[str], list[list[str]]]:
    """Header and rows: category, questions, then one `metric` cell per model."""
    header = ["category", "questions", *(r.name for r in results)]
    rows = []
    for cat in category_order(results):
        n = next((r.scores[cat]["questions"] for r in results if cat in r.scores), 0)
        cells = [f"{r.scores[cat][mode][metric]:.2f}" if cat in r.scores else "–"
                 for r in results]
        rows.append([cat, str(n), *cells])
    return header, rows


def summary_rows(results: Sequence[ModelResult]) -> tuple[list[str], list[list[str]]]:
    """One row per model and task (overall word analogies, sentiment): all six figures."""
    header = ["model", "task", *(f"{m} {'excl' if mode == 'excluding' else 'incl'}"
                                 for mode in MODES for m in METRICS), "top1 is C"]
    rows = []
    for r in results:
        for task in ("overall", "sentiment"):
            if task in r.scores:
                s = r.scores[task]
                rows.append([r.name, task, *(f"{s[mode][m]:.3f}" for mode in MODES
                                             for m in METRICS),
                             f"{s['including']['retrieves_c']:.3f}"])
    return header, rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    aligns = ["---" if i == 0 or not rows or not _numeric(rows[0][i]) else "---:"
              for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return cell.replace(".", "", 1).isdigit() or cell == "–"


def markdown_report(results: Sequence[ModelResult], pool_size: int, tuples: str) -> str:
    """The benchmark page's section: top-1 per category (queries excluded), then the summary."""
    parts = [
        f"Pool: {pool_size:,} Yelp sentences; tuples: `{tuples}`; cosine to v(C)+v(B)−v(A).",
        "",
        "**Top-1 accuracy per category** (A, B, C excluded from the candidates):",
        "",
        markdown_table(*table_rows(results, "top1", "excluding")),
        "",
        "**Overall** (all word-analogy questions) **and the sentiment task**, "
        "excluding (excl) and including (incl) the query sentences; *top1 is C*: share of "
        "questions whose nearest sentence, queries included, is C itself:",
        "",
        markdown_table(*summary_rows(results)),
        "",
    ]
    return "\n".join(parts)
