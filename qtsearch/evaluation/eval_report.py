"""Tables of an evaluation run: one row per task, one column per encoder, then the published
reference figures. Shared by the Rich table and the Markdown output (docs/benchmarks.md)."""

from __future__ import annotations

from qtsearch.evaluation.harness import EvalRun, Task
from qtsearch.evaluation.tasks.reference import REFERENCE

#: Metrics shown as percentages (one decimal); everything else is a fraction (three decimals).
PERCENT_SUFFIXES = ("acc", "f1", "top1", "top10", "chance")


def fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if metric.endswith(PERCENT_SUFFIXES) else f"{value:.3f}"


def cell(task: type[Task], metrics: dict[str, float] | None) -> str:
    """The headline metrics of one task, "a/b" style; "–" where nothing is known."""
    if not metrics or not any(m in metrics for m in task.headline):
        return "–"
    return "/".join(fmt(m, metrics.get(m)) for m in task.headline)


def table(run: EvalRun, reference: bool = True) -> tuple[list[str], list[list[str]]]:
    """(header, rows): task, metric names, one cell per encoder, then per reference source."""
    refs = {k: v for k, v in REFERENCE.items()
            if reference and any(t.name in v for t in run.tasks)}
    header = ["task", "metric", *(e.name for e in run.encoders), *refs]
    rows = []
    for task in run.tasks:
        rows.append([task.name, "/".join(task.headline),
                     *(cell(task, e.results.get(task.name)) for e in run.encoders),
                     *(cell(task, ref.get(task.name)) for ref in refs.values())])
    return header, rows


def notes(run: EvalRun) -> list[str]:
    """One line per encoder on time taken, and the chance level of retrieval tasks."""
    lines = []
    for e in run.encoders:
        total = sum(e.seconds.values())
        lines.append(f"{e.name} ({e.dim}-d): {total:,.0f} s in all, "
                     f"{e.encode_seconds:,.0f} s of it encoding ({e.cpu_seconds:,.0f} s CPU)")
        nxt = e.results.get("NextSent")
        if nxt and e is run.encoders[0]:
            lines.append(f"NextSent: {nxt['n']:,.0f} queries among {nxt['candidates']:,.0f} "
                         f"candidate sentences; chance top-1 {nxt['chance']:.4f}%")
    return lines


def to_markdown(run: EvalRun, reference: bool = True) -> str:
    header, rows = table(run, reference)
    ncols = len(header)
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join(["---"] * 2 + ["---:"] * (ncols - 2)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out.append("")
    out += [f"- {line}" for line in notes(run)]
    return "\n".join(out) + "\n"
