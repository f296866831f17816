"""Tables of a relevance run: one row per task and metric, then the mean over the paraphrase
tasks; one column per system. Shared by the Rich table and the Markdown output (docs)."""

from __future__ import annotations

from typing import Any

from qtsearch.evaluation.relevance.relevance_run import RelevanceRun
from qtsearch.evaluation.relevance.tasks_base import GROUP_ORDER

MEAN_ROW = f"mean ({GROUP_ORDER[0]})"
MEAN_METRICS = ("R@1", "R@10", "MRR@10")


def table(run: RelevanceRun) -> tuple[list[str], list[list[str]], list[set[int]]]:
    """(header, rows, best columns of each row): task, metric, one figure per system."""
    labels = [s.label for s in run.systems]
    header = ["task", "metric", *labels]
    rows: list[list[str]] = []
    best: list[set[int]] = []

    def add(task: str, metric: str, values: list[float]) -> None:
        cells = [f"{v:.3f}" for v in values]
        rows.append([task, metric, *cells])
        top = max(cells, key=float)
        best.append({2 + i for i, c in enumerate(cells) if c == top})

    for task in run.tasks:
        for i, metric in enumerate(task.headline):
            add(task.name if i == 0 else "", metric,
                [run.results[task.name][lab][metric] for lab in labels])
    mean = run.group_mean()
    if sum(t.group == GROUP_ORDER[0] for t in run.tasks) > 1:
        for i, metric in enumerate(MEAN_METRICS):
            add(MEAN_ROW if i == 0 else "", metric, [mean[lab][metric] for lab in labels])
    return header, rows, best


def notes(run: RelevanceRun) -> list[str]:
    """Pool and query counts per task, refused queries, and the query time of each system."""
    lines = [f"{t.name}: {len(t.queries):,} queries, pool of {len(t.pool):,} sentences "
             f"({t.description})" for t in run.tasks]
    for s in run.systems:
        cells = [run.results[t.name][s.label] for t in run.tasks]
        failed = sum(int(c["failed"]) for c in cells)
        queries = sum(c["queries"] for c in cells)
        seconds = sum(c["query_seconds"] for c in cells)
        warned = sum(int(c["warnings"]) for c in cells)
        example = next((c["warning_example"] for c in cells if c["warning_example"]), "")
        refused = f"; refused (scored as misses): {failed:,}" if failed else ""
        warnings = f"; warnings: {warned:,}, e.g. \"{example}\"" if warned else ""
        lines.append(f"{s.label}: {queries / max(seconds, 1e-9):,.0f} queries/s through "
                     f"Index.search, batches of 256{refused}{warnings}")
    return lines


def build_notes(run: RelevanceRun) -> list[str]:
    """Per encoder: the fitted transform of its indexes and its embedding speed in the build
    (from the manifests, so cached indexes report the build that made them)."""
    per: dict[str, list[dict[str, Any]]] = {}
    for key, build in run.builds.items():
        per.setdefault(key.partition("|")[2], []).append(build)
    lines = []
    for name, builds in per.items():
        fits = ", ".join(sorted({str(b["transform"]) for b in builds}))
        count = sum(b["sentences"] for b in builds)
        seconds = sum(b["embed_seconds"] for b in builds)
        lines.append(f"{name}: fitted transform {fits}; embedded {count:,} pool sentences in "
                     f"{seconds:,.1f} s ({count / max(seconds, 1e-9):,.0f}/s)")
    return lines


def to_markdown(run: RelevanceRun) -> str:
    header, rows, best = table(run)
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|"]
    for row, b in zip(rows, best, strict=True):
        cells = [f"**{c}**" if i in b else c for i, c in enumerate(row)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {line}" for line in notes(run) + build_notes(run)]
    return "\n".join(out) + "\n"
