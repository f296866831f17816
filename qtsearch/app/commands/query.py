"""`qtsearch search`, `qtsearch analogy`, `qtsearch shell`: query an index folder."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from qtsearch.app.commands.common import (
    RERANK_DEPTH_OPT,
    err,
    model_option,
    out,
    print_json,
    top_k_option,
)
from qtsearch.core.errors import InputError, UsageError
from qtsearch.search.defaults import TOP_K

if TYPE_CHECKING:  # the query layer is imported by the commands that run (it reads text files)
    from qtsearch.lifecycle.answers import Answer
    from qtsearch.lifecycle.querying import Explainer

INDEX_ARG = typer.Argument(..., help="Index folder (made by `qtsearch build-index`).")
K_OPT = top_k_option(TOP_K, help="Results per query (clamped to the index size).")
#: The spelling before -k/--top-k, kept working for existing scripts but not shown.
OLD_K_OPT = typer.Option(None, "--k", hidden=True)
MODE_OPT = typer.Option(None, "--mode",
                        help="hybrid | semantic | lexical. hybrid fuses vector search with "
                             "BM25 over the words; default: hybrid where the index has its "
                             "BM25 files (indexes built before lexical search: semantic).")
WHERE_OPT = typer.Option(None, "--where", "-w",
                         help="Only sentences whose COLUMN equals VALUE: source=emma.txt "
                              "(file name or full path), doc=N, line=N, position=N or any "
                              "other column of the index (Wikipedia: title=…, doc_id=…, "
                              "url=…, section=…). Repeatable (all must hold).")
BY_OPT = typer.Option("passage", "--by",
                      help="passage | doc. doc: one hit per document (records, articles, "
                           "files or blank-line-separated blocks), ranked by its best passage; "
                           "--json adds each document's other matching `passages`.")
MODEL_OPT = model_option(help="Model folder; default: the one recorded in the index. It must "
                              "be the model the index was built with.")
DEVICE_OPT = typer.Option("cpu", help="cpu | cuda | auto. One query encodes in milliseconds "
                                      "on the CPU, which also starts fastest; cuda also "
                                      "searches a flat index on the GPU (batched queries).")
PARAM_OPT = typer.Option(None, "--param", "-p",
                         help="faiss search parameter NAME=VALUE overriding the index's own, "
                              "e.g. nprobe=32 (IVF) or efSearch=256 (HNSW). Repeatable.")
JSON_OPT = typer.Option(False, "--json",
                        help="Print a JSON array, one object per query: {query, hits, note, "
                             "error}; each hit is {id, score, text, source, line, doc, "
                             "position, legs} (legs: each search leg's own score), with "
                             "title, url, doc_id, section before legs for Wikipedia.")
EXPLAIN_OPT = typer.Option(False, "--explain",
                           help="Show why each hit ranks where it does: each leg's score and "
                                "rank (cosine, BM25), its z-score and part of the fused score, "
                                "the query's stemmed terms the hit holds, the query's composed "
                                "words and the fusion weight (--json: an `explain` object per "
                                "hit). docs/scores.md reads them.")
RERANK_OPT = typer.Option(None, "--rerank",
                          help="Re-score each query's first hits with a stronger, slower "
                               "encoder: minilm (all-MiniLM-L6-v2, needs the [encoders] "
                               "extra), model2vec, glove or a model folder. Hits are then "
                               "ordered by its cosine (--json legs: first, rerank). On 2 CPU "
                               "cores MiniLM took ~9 s to load in each command (shell and "
                               "serve load it once), then 0.24 s a query at depth 30 (p50; "
                               "p90 0.37 s), 0.11 s at depth 10 (benchmarks/rerank.py).")


def _params(items: list[str] | None) -> dict[str, float]:
    params: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            params[name.strip()] = float(value)
        except ValueError:
            raise UsageError(f"--param {item!r}: expected NAME=NUMBER, e.g. nprobe=32") from None
    return params


def _open(index: Path, model: Path | None, device: str, param: list[str] | None):
    from qtsearch.lifecycle.facade import Index  # faiss: only for the commands that query

    return Index.open(index, model=model, device=device, params=_params(param))


def _print(answers: list[Answer], as_json: bool, titles: list[str] | None = None,
           weak: float | None = None, explainer: Explainer | None = None) -> None:
    """One answer per query, in order: its hits (a table, hits under the `weak` cosine dimmed,
    or JSON with the query's note), or its error (one `qtsearch: error:` line on stderr; in
    JSON also its `error` field); with `explainer`, why each hit ranks where it does."""
    from qtsearch.lifecycle.answers import answer_json

    if as_json:
        print_json([answer_json(q, hits, e, explainer) for q, hits, e in answers])
    from qtsearch.app.hit_tables import show_hits

    for n, (q, hits, e) in enumerate(answers):
        if e is not None:
            err.print(f"qtsearch: error: {e}", highlight=False, markup=False, soft_wrap=True)
        elif not as_json:
            explained = explainer.explain(q, hits) if explainer and hits else None
            show_hits(out, hits or [], titles[n] if titles else str(q), weak, explained)
    codes = [e.code for _, _, e in answers if e is not None]
    if codes:
        raise typer.Exit(codes[0])


def _read_stdin() -> list[str]:
    from qtsearch.text.reader import clean_lines

    # bytes, so undecodable input is repaired with a warning like a corpus file, not a crash
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text stream stand-in (tests, embedding applications)
        raw = (line.encode("utf-8", "surrogateescape") for line in sys.stdin)
    # blank lines kept: answer i is about input line i (a blank line's answer is an error)
    queries = list(clean_lines(raw, "<stdin>", keep_blank=True))
    if not any(queries):
        raise InputError("no queries on standard input")
    return queries


def search(
    index: Path = INDEX_ARG,
    queries: list[str] = typer.Argument(
        ..., help="Sentences to search for (quote each one); `-` reads one per line from "
                  "standard input (one answer per line, blank lines included). With --ids: "
                  "sentence ids whose neighbours to find."),
    k: int = K_OPT,
    old_k: int | None = OLD_K_OPT,
    mode: str | None = MODE_OPT,
    by: str = BY_OPT,
    where: list[str] | None = WHERE_OPT,
    ids: bool = typer.Option(False, "--ids",
                             help="QUERIES are ids of stored sentences: find their neighbours "
                                  "(each one left out of its own list; vectors only)."),
    model: Path | None = MODEL_OPT,
    device: str = DEVICE_OPT,
    param: list[str] | None = PARAM_OPT,
    rerank: str | None = RERANK_OPT,
    rerank_depth: int = RERANK_DEPTH_OPT,
    explain: bool = EXPLAIN_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Find the stored sentences that best match each query sentence.

    Scores: hybrid, the fused score (each leg's own in --json `legs`); semantic, cosine
    similarity (approximate for quantised indexes); lexical, BM25. With the shipped model the
    first 30 semantic or hybrid hits (100 over passages) are re-scored word by word (word
    alignment), the score fusing both stages, the cosine kept in `legs` (docs/scores.md). A bad
    query (empty; in semantic mode, only unknown words) gets one error line and exit status
    3, the other queries are still answered. A query mostly of words the model does not know
    gets a warning (and a `note` in --json): hybrid searches it by its words only. A query
    with no match gets a `no match` warning and exit status 0; one whose best cosine is under
    the model's weak-match threshold a `no good match` warning (its weak hits dimmed). The
    search time goes to stderr after the results (not with --json)."""
    k = old_k if old_k is not None else k
    from qtsearch.lifecycle.answers import answer_ids, answer_queries
    from qtsearch.lifecycle.querying import parse_where

    if queries == ["-"]:
        queries = _read_stdin()
    filters = parse_where(where)
    if ids and rerank:
        raise UsageError("--rerank re-scores hits of query sentences, not of --ids")
    reranker = None
    if rerank:
        from qtsearch.lifecycle.querying import Reranker

        reranker = Reranker(rerank, rerank_depth, device)
    with _open(index, model, device, param) as idx:
        explainer = idx.explainer() if explain else None
        started = time.perf_counter()
        if ids:
            as_ids = []
            for q in queries:
                try:
                    as_ids.append(int(q))
                except ValueError:
                    raise UsageError(f"--ids: {q!r} is not a sentence id") from None
            answers = answer_ids(idx, as_ids, k, filters)
            titles = [f"neighbours of {r.id}: {r.text}" for r in idx.get(as_ids)]
        else:
            from qtsearch.app.shell import within

            answers = answer_queries(idx, queries, k, mode, filters,
                                     within(reranker, len(idx)), by)
            titles = None
        ms = (time.perf_counter() - started) * 1000
        # a failed query exits from _print with its one error line, and no time
        _print(answers, as_json, titles, idx.weak_cosine, explainer)
        if not as_json:
            _timing(answers, ms)


def _timing(answers: list[Answer], ms: float) -> None:
    """The search time on stderr, as the shell shows it after each table."""
    found = sum(len(hits or []) for _, hits, _ in answers)
    each = f" ({ms / len(answers):.1f} ms a query)" if len(answers) > 1 else ""
    err.print(f"[dim]{found} results in {ms:.1f} ms{each}[/dim]", highlight=False)


def analogy(
    index: Path = INDEX_ARG,
    a: str = typer.Argument(..., help="Sentence A."),
    b: str = typer.Argument(..., help="Sentence B."),
    c: str = typer.Argument(..., help="Sentence C."),
    k: int = K_OPT,
    old_k: int | None = OLD_K_OPT,
    keep_inputs: bool = typer.Option(False, "--keep-inputs",
                                     help="Allow A, B and C themselves among the results."),
    model: Path | None = MODEL_OPT,
    device: str = DEVICE_OPT,
    param: list[str] | None = PARAM_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Find sentences D such that A is to B as C is to D.

    D ranks by cosine with normalise(C + B − A) over normalised vectors (the Quick-Thoughts
    analogy query). E.g. A a negative review, B its positive rewrite, C another negative
    review: D are positive versions of C. A, B and C themselves are left out of the results
    unless --keep-inputs."""
    k = old_k if old_k is not None else k
    from qtsearch.lifecycle.answers import answer_analogy

    with _open(index, model, device, param) as idx:
        _print([answer_analogy(idx, a, b, c, k, keep_inputs)], as_json)


def shell(
    index: Path = INDEX_ARG,
    k: int = K_OPT,
    old_k: int | None = OLD_K_OPT,
    mode: str | None = MODE_OPT,
    model: Path | None = MODEL_OPT,
    device: str = DEVICE_OPT,
    param: list[str] | None = PARAM_OPT,
    rerank: str | None = RERANK_OPT,
    rerank_depth: int = RERANK_DEPTH_OPT,
) -> None:
    """Search interactively: type a sentence, see its nearest sentences.

    The model and index load once; each line is then one query. :analogy A | B | C,
    :id ID (neighbours of a stored sentence), :ctx ID (a hit in its passage), :k N,
    :mode NAME, :where COLUMN=VALUE (:where alone clears the filters), :rerank NAME [N]
    (:rerank off), :help.
    Ctrl-C cancels the line, Ctrl-D leaves. History is kept in ~/.qtsearch_history
    (the QTSEARCH_HISTORY environment variable names another file)."""
    k = old_k if old_k is not None else k
    if k < 1:
        raise UsageError(f"-k must be at least 1 (got {k})")
    # a plain line, not a spinner: it shows on any terminal, for the seconds before `ready:`
    out.print(f"loading {index}…", highlight=False, markup=False)
    idx = _open(index, model, device, param)
    from qtsearch.app.shell import Shell

    with idx:
        session = Shell(idx, k=k, console=out)
        if mode is not None:
            session.handle(f":mode {mode}")
        if rerank is not None:
            session.handle(f":rerank {rerank} {rerank_depth}")
        code = session.run()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(search)
    app.command()(analogy)
    app.command()(shell)
