"""`qtsearch build-index`, `add`, `export`."""

from __future__ import annotations

import logging
from pathlib import Path

import typer
from rich.table import Table

from qtsearch.app.commands.common import counted, err, out
from qtsearch.app.progress_bars import RichReporter
from qtsearch.core.errors import OutputError
from qtsearch.lifecycle.on_disk import Manifest, read_manifest
from qtsearch.lifecycle.writers import (
    BESIDE_EMBED,
    FLAT_MAX,
    PARTITIONED,
    SQ8_MAX,
    STAGES,
    WHITEN,
    IndexConfig,
    total_seconds,
)
from qtsearch.text.records import PASSAGE_WORDS

# The builders (torch, faiss, numpy) are imported in the commands that run them, so
# that `qtsearch --help` and every other command start without them. Defaults come from
# IndexConfig, which (like the rest of what lifecycle.writers imports eagerly) imports none of
# them.

BUILD_HELP = (
    "Turn a corpus into a searchable index (FAISS vectors + SQLite metadata).\n\n"
    "CORPUS is one or more files or folders (plain or .gz): one sentence per line with a blank "
    "line between documents, running text with --split-sentences (a file is a document, or "
    "each paragraph with --docs paragraph), WikiExtractor output (recognised by its <doc …> "
    "lines: each article a document, its title, id, url and section headings kept as "
    "metadata), or records: JSON Lines, CSV/TSV or Parquet files (BEIR's corpus.jsonl as it "
    "is), one document a record with an id, a title and a text field, indexed as passages of "
    "up to --passage-words words that start with the title. Every sentence or passage keeps "
    "its source file, line, document and position.\n\n"
    "The index folder (default indexes/<corpus name>/) holds index.faiss, meta.sqlite, "
    "manifest.json and config.json. Builds are atomic and resumable: after an interruption, "
    "the same command continues from the finished shards."
)

FORMAT_OPT = typer.Option(
    "auto", "--format", help="auto | text | wikiextractor | records. auto: records where the "
    "file name ends in .jsonl, .ndjson, .csv, .tsv or .parquet (optionally .gz), WikiExtractor "
    "where a file starts with a <doc …> line, else text (lines, or running text with "
    "--split-sentences).")
DOCS_OPT = typer.Option(
    "file", "--docs", help="With --split-sentences: what one document is, file | paragraph "
    "(paragraphs separated by blank lines).")
PASSAGE_OPT = typer.Option(
    PASSAGE_WORDS, "--passage-words", help="Records: a document's sentences are grouped into "
    "passages of at most this many words (0: one passage a document).")
ID_FIELD_OPT = typer.Option(
    None, "--id-field", help="Records: the id field (default: _id, id, doc_id or docid).")
TITLE_FIELD_OPT = typer.Option(
    None, "--title-field", help="Records: the title field (default: title, name or headline).")
VERBOSE_OPT = typer.Option(
    False, "--verbose", "-v", help="Also name, by its line, each record skipped, cut or "
    "replaced by a later one with the same id (the warning at the end of each file counts "
    "them).")
TEXT_FIELD_OPT = typer.Option(
    None, "--text-field", help="Records: the text field (default: text, body, content, "
    "abstract or contents).")


def verbosity(verbose: bool) -> None:
    """--verbose: the library's INFO messages (each odd record by its line) are shown too."""
    log = logging.getLogger("qtsearch")
    if verbose and log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"


def summary_table(manifest: Manifest, bytes_on_disk: int, resumed: bool = False) -> Table:
    """Time per stage and throughput of a finished build. The caption is one phrase a line,
    and the table at least as wide as the longest, so no phrase is ever cut in two; after a
    resumed build the times (and the total) include the earlier, interrupted runs."""
    n = manifest.count
    phrases = [f"{manifest.index_type} ({manifest.index_key})",
               f"dim {manifest.dim}, fit {manifest.fit}", f"{_size(bytes_on_disk)} on disk"]
    if resumed:
        phrases.append("times include earlier, interrupted runs")
    table = Table(title=f"{counted(n, 'sentence')} indexed", caption="\n".join(phrases),
                  min_width=max(map(len, phrases)) + 2)
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    table.add_column("sentences/s", justify="right")
    # each stage's share of the total: where the time of a rebuild goes (side-by-side stages
    # overlap, so their shares add up to more than 100%)
    table.add_column("share", justify="right")
    stages = manifest.stages
    parallel = manifest.build.get("parallel_stages")
    total = total_seconds(stages, parallel)
    for name in STAGES:
        secs = stages.get(name, 0.0)
        table.add_row(name, f"{secs:,.1f}", f"{n / secs:,.0f}" if secs > 0 else "—",
                      f"{100 * secs / total:.0f}%" if total > 0 else "—")
    beside = ("embed, index ∥ metadata" if parallel == BESIDE_EMBED
              else "index ∥ metadata" if parallel else None)
    label = ", ".join([beside] * bool(beside) + ["all runs"] * resumed)
    table.add_row("[bold]total[/bold]" + (f" ({label})" if label else ""),
                  f"[bold]{total:,.1f}",
                  f"[bold]{n / total:,.0f}" if total > 0 else "—", "")
    return table


def build_index_cmd(
    corpus: list[Path] = typer.Argument(
        ..., help="Text or records files, or folders of them (plain or .gz)."),
    model: Path | None = typer.Option(
        None, "--model", "-m", help="Trained model folder (default: the shipped model)."),
    out_dir: Path | None = typer.Option(
        None, "--out", "-o", help="Index folder to write (default: indexes/<corpus name>)."),
    index: str = typer.Option(
        IndexConfig.index, "--index", help="auto | flat | sq8 | ivf | ivf-pq | hnsw (auto, from "
        f"corpus size and free memory: flat under {FLAT_MAX // 1000}k sentences, sq8 under "
        f"{SQ8_MAX // 1000}k, then ivf (inverted "
        "file, built in seconds) while its estimated query cost stays within budget, else hnsw "
        "where the graph fits in half the free memory, else ivf-pq; the reason is printed)."),
    split_sentences: bool = typer.Option(
        IndexConfig.split_sentences, "--split-sentences",
        help="Input is running text: split it into sentences."),
    device: str = typer.Option(
        IndexConfig.device, help="auto | cpu | cuda: where embedding and IVF training/assignment "
        "run (the "
        "saved index is a CPU index either way)."),
    precision: str = typer.Option(IndexConfig.precision,
                                  help="Embedding precision: auto | fp32 | bf16."),
    parquet: bool = typer.Option(
        IndexConfig.parquet, "--parquet", help="Also write the metadata as meta.parquet."),
    shard_size: int = typer.Option(
        IndexConfig.shard_size,
        help="Sentences per on-disk shard (the unit a rerun resumes from)."),
    batch_size: int = typer.Option(IndexConfig.batch_size, help="Sentences per embedding batch."),
    fit: str = typer.Option(
        IndexConfig.fit, "--fit", help="Vectors fitted to the corpus, applied to every vector "
        "and query: auto | none | centre | abtt:D (remove the top D principal directions) | "
        f"whiten:K (whiten to K dims); auto: the model's own setting where its folder names "
        "one (config.json \"search\": {\"fit\": …}; the shipped model: centre), else "
        f"{WHITEN} under {SQ8_MAX // 1000}k sentences and {PARTITIONED} from there on "
        "(where a graph or IVF is built)."),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="Replace an existing index (kept until the new one is done)."),
    input_format: str = FORMAT_OPT,
    docs: str = DOCS_OPT,
    passage_words: int = PASSAGE_OPT,
    id_field: str | None = ID_FIELD_OPT,
    title_field: str | None = TITLE_FIELD_OPT,
    text_field: str | None = TEXT_FIELD_OPT,
    engine: str = typer.Option(
        "local", "--engine", help="local | ray: ray embeds the shards and fills the index on a "
        "Ray cluster (extra [ray]); the same index as local."),
    address: str | None = typer.Option(
        None, "--address", help="With --engine ray: auto (a running cluster) or ray://HOST:PORT "
        "(default: start Ray on this machine)."),
    workers: int | None = typer.Option(
        None, "--workers", help="With --engine ray: workers (default: one per CPU, or per "
        "--gpus-per-worker GPUs)."),
    gpus_per_worker: float = typer.Option(
        0.0, "--gpus-per-worker", help="With --engine ray: GPUs each worker holds (0: CPU)."),
    wait: bool = typer.Option(
        False, "--wait", help="When another build or add is writing this index, wait for it "
        "(default: exit 7 at once, naming it)."),
    adapt_to: Path | None = typer.Option(
        None, "--adapt", help="First adapt the model (--model, or the shipped one) to this "
        "corpus as `qtsearch adapt` does with its defaults, into this model folder, then index "
        "with the adapted model. A rerun reuses the folder's finished adaptation (or finishes "
        "an interrupted one) when the corpus files are unchanged."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    verbose: bool = VERBOSE_OPT,
) -> None:
    from qtsearch.lifecycle.writers import RayOptions, build_on

    verbosity(verbose)
    reporter = RichReporter(not quiet, err)
    if adapt_to is not None:
        model = adapted(corpus, model, adapt_to, split_sentences, reporter)
    config = IndexConfig(
        corpus=[str(p) for p in corpus], model=str(model) if model else None,
        out=str(out_dir) if out_dir else None, index=index, split_sentences=split_sentences,
        device=device, precision=precision, parquet=parquet, shard_size=shard_size,
        batch_size=batch_size, overwrite=overwrite, fit=fit, input_format=input_format,
        docs=docs, passage_words=passage_words, id_field=id_field, title_field=title_field,
        text_field=text_field)
    result = build_on(engine, config, RayOptions(address, workers, gpus_per_worker),
                      reporter=reporter, wait=None if wait else 0.0)
    manifest = Manifest.from_dict(result.manifest)
    if result.already_built:  # also with --quiet: it says why nothing was done
        err.print(f"{result.path}: already built from the same corpus files, model and "
                  "options; nothing to do (--overwrite builds it again)", highlight=False,
                  soft_wrap=True)
    elif not quiet:
        out.print(summary_table(manifest, result.bytes_on_disk, bool(result.resumed)))
    out.print(f"index of {counted(manifest.count, 'sentence')} → {result.path}")


def adapted(corpus: list[Path], base: Path | None, out_dir: Path, split_sentences: bool,
            reporter: RichReporter) -> Path:
    """build-index --adapt: the base model adapted to the corpus in `out_dir`."""
    # torch loads only for a build that adapts
    from qtsearch.training.adapt_trainer import adapt_once
    from qtsearch.training.configs import AdaptConfig

    result = adapt_once(AdaptConfig(corpus=[str(p) for p in corpus],
                                    model=str(base) if base else None, out=str(out_dir),
                                    split_sentences=split_sentences), reporter=reporter)
    err.print(result.summary(), highlight=False, soft_wrap=True)
    return out_dir


def add_cmd(
    index: Path = typer.Argument(..., help="An index folder made by build-index."),
    corpus: list[Path] = typer.Argument(..., help="More text files or folders to append."),
    split_sentences: bool | None = typer.Option(
        None, "--split-sentences/--no-split-sentences", show_default=False,
        help="Input is running text: split it into sentences (default: as the index was "
        "built)."),
    device: str = typer.Option(IndexConfig.device, help="auto | cpu | cuda, for embedding."),
    batch_size: int = typer.Option(IndexConfig.batch_size, help="Sentences per embedding batch."),
    input_format: str = FORMAT_OPT,
    allow_duplicates: bool = typer.Option(
        False, "--allow-duplicates", help="Add a file even when the index already holds it "
        "(same sha256; by default it is skipped with a note)."),
    upsert: bool = typer.Option(
        False, "--upsert", help="A record whose id the index already holds replaces it: its "
        "old passages are deleted in the same write (records and articles; text without ids "
        "is appended)."),
    wait: bool = typer.Option(
        False, "--wait", help="When another build or add is writing this index, wait for it "
        "(default: exit 7 at once, naming it)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    verbose: bool = VERBOSE_OPT,
) -> None:
    """Append sentences to an existing index, embedded with the index's own model.

    The index is updated on a copy that replaces it only when complete."""
    from qtsearch.lifecycle.writers import add_to_index, split_option

    verbosity(verbose)
    manifest = Manifest.read(index)
    result = add_to_index(index, [str(p) for p in corpus], split_sentences=split_sentences,
                          device=device, batch_size=batch_size,
                          reporter=RichReporter(not quiet, err), input_format=input_format,
                          wait=None if wait else 0.0, allow_duplicates=allow_duplicates,
                          on_note=lambda line: err.print(line, highlight=False, soft_wrap=True),
                          upsert=upsert)
    # after the work, so that a failing add still ends in exactly one error line
    _, how = split_option(manifest, split_sentences, corpus, input_format)
    err.print(how, highlight=False, soft_wrap=True)  # one line, however narrow the terminal
    for note in result.skipped:
        err.print(note, highlight=False, soft_wrap=True)
    replaced = f" (replacing {result.replaced:,})" if upsert else ""
    out.print(f"added {counted(result.added, 'sentence')}{replaced} in {result.seconds:,.1f} s "
              f"→ {result.path} now holds {result.count:,}")


def export_cmd(
    index: Path = typer.Argument(..., help="An index folder made by build-index."),
    file: Path = typer.Argument(..., help="Parquet file to write."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing file."),
) -> None:
    """Write an index's sentence metadata (id, text, source, line, doc, position; title, url,
    doc_id, section) to Parquet."""
    from qtsearch.lifecycle.on_disk import export_metadata

    read_manifest(index)
    if file.exists() and not overwrite:
        raise OutputError(f"{file}: already exists (use --overwrite to replace it)")
    n = export_metadata(index, file)
    out.print(f"wrote {counted(n, 'row')} → {file}")


def register(app: typer.Typer) -> None:
    app.command("build-index", help=BUILD_HELP)(build_index_cmd)
    app.command("add")(add_cmd)
    app.command("export")(export_cmd)
