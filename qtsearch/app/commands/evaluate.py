"""`qtsearch eval`: SentEval-style transfer, similarity and next-sentence evaluation."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from qtsearch.app.commands.common import err, model_option, out, print_json
from qtsearch.app.progress_bars import RichReporter
from qtsearch.core.errors import OutputError, UsageError

HELP = (
    "Evaluate sentence encoders on SentEval-style tasks, with baselines and published figures "
    "beside.\n\n"
    "MODEL is one or more model folders (default: the shipped model; -m/--model DIR works "
    "too); glove, minilm and random[:DIR] name baselines too.\n\n"
    "Tasks (--tasks: names or groups, comma-separated): classification = MR CR SUBJ MPQA "
    "(10-fold CV), TREC SST2; pairs = MSRP SICK-E; relatedness = SICK-R STSB (dev); "
    "sts = STS12 … STS16 (cosine, no training); retrieval = NextSent (the true next sentence "
    "among all sentences of held-out Gutenberg books).\n\n"
    "Probes are logistic regressions on frozen, standardised embeddings, the L2 penalty chosen "
    "on dev data or inner folds. Every task sees each vector L2-normalised, as the index "
    "searches it (--raw-vectors: the encoder's raw output, SentEval's convention). Sentence "
    "vectors are kept in $QTSEARCH_CACHE/eval/ per model "
    "fingerprint, so a second run only fits probes (--no-cache: encode anew, keep nothing). "
    "Accuracy and F1 are in %, correlations in [-1, 1]. --json prints {results: {encoder: "
    "{task: {metric: value}}}, reference, encoders, config}."
)


def evaluate(
    models: list[str] = typer.Argument(
        None, metavar="MODEL", help="Model folders or baseline names (default: shipped model)."),
    model_opts: list[str] | None = model_option("A model folder or baseline name, as MODEL "
                                                "(repeatable; evaluated after MODEL)."),
    tasks: str = typer.Option(
        "all", "--tasks", "-t", help="Task or group names, comma-separated (all, classification, "
        "pairs, relatedness, sts, retrieval, MR, …, NextSent)."),
    baselines: str = typer.Option(
        "", "--baselines", "-b", help="Baselines run after the models: glove, minilm, random."),
    data: Path | None = typer.Option(None, "--data", help="Data folder with transfer/ and sts/ "
                                     "(default: $QTSEARCH_DATA or ../shared/data)."),
    books: list[Path] | None = typer.Option(None, "--books", help="Books for NextSent (running "
                                            "text; default: Gutenberg 0740–0757, held out)."),
    queries: int = typer.Option(5000, help="NextSent query sentences (sampled reproducibly)."),
    limit: int | None = typer.Option(None, help="Examples per split, drawn at random: a quick, "
                                     "rough run (figures are not comparable)."),
    seed: int = typer.Option(0, help="Seed of folds, samples and probes."),
    device: str = typer.Option("auto", help="auto | cpu | cuda (encoding only)."),
    batch_size: int = typer.Option(256, help="Sentences per encoding batch."),
    solver: str = typer.Option("lbfgs", help="Probe solver: lbfgs (ours, one probe at a time, "
                               "warm-started), batched (all probes of a stage in one L-BFGS) "
                               "or sklearn (the reference, as before)."),
    cache: bool = typer.Option(True, "--cache/--no-cache", help="Read and keep sentence vectors "
                               "in $QTSEARCH_CACHE/eval/ (per model fingerprint)."),
    raw_vectors: bool = typer.Option(False, "--raw-vectors", help="Probe the encoder's raw "
                                     "vectors instead of the unit vectors search uses."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the table."),
    markdown: str | None = typer.Option(None, "--markdown", "-M", metavar="FILE",
                                        help="Also write the table as Markdown (- for stdout)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> None:
    from qtsearch.encoders.registry import resolve_encoders
    from qtsearch.evaluation import eval_report
    from qtsearch.evaluation.harness import EvalConfig, load_tasks
    from qtsearch.evaluation.harness import evaluate as run_eval
    from qtsearch.evaluation.solvers import SOLVERS
    from qtsearch.evaluation.tasks.reference import REFERENCE

    if limit is not None and limit < 10:
        raise UsageError("--limit must be at least 10")
    if queries < 1:
        raise UsageError("--queries must be positive")
    if solver not in SOLVERS:
        raise UsageError(f"unknown --solver {solver!r}; choose from {', '.join(SOLVERS)}")
    config = EvalConfig(tasks=[tasks], data_dir=str(data) if data else None, limit=limit,
                        seed=seed, books=[str(b) for b in books] if books else None,
                        queries=queries, batch_size=batch_size, solver=solver, cache=cache,
                        unit_vectors=not raw_vectors)
    loaded = load_tasks(config)  # bad task names or data fail before any model loads
    named = [*(models or []), *(model_opts or [])]
    specs = (named or ["default"]) + [b.strip() for b in baselines.split(",") if b.strip()]
    encoders, skipped = resolve_encoders(specs, device=device)
    for message in skipped:
        err.print(f"[yellow]qtsearch: warning: {message}[/yellow]")
    run = run_eval(encoders, config, reporter=RichReporter(not quiet, err), tasks=loaded)

    if markdown:
        text = eval_report.to_markdown(run)
        if markdown == "-":
            out.file.write(text)
        else:
            try:
                Path(markdown).write_text(text, encoding="utf-8")
            except OSError as e:
                raise OutputError(f"{markdown}: cannot write ({e.strerror})") from e
    if as_json:
        data_out = run.to_json()
        names = {t.name for t in run.tasks}
        data_out["reference"] = {src: {k: v for k, v in figs.items() if k in names}
                                 for src, figs in REFERENCE.items()}
        print_json(data_out)
    elif markdown != "-":
        header, rows = eval_report.table(run)
        table = Table(*header, title="qtsearch eval", title_justify="left")
        for col in table.columns[2:]:
            col.justify = "right"
        for col in table.columns[2 + len(run.encoders):]:
            col.style = "dim"
        for row in rows:
            table.add_row(*row)
        out.print(table)
        for line in eval_report.notes(run):
            out.print(f"[dim]{line}[/dim]")


def register(app: typer.Typer) -> None:
    app.command("eval", help=HELP)(evaluate)
