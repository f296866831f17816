"""`qtsearch search`, `qtsearch analogy`, `qtsearch shell`: query an index folder."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from qtsearch.commands.common import err, out, print_json
from qtsearch.errors import InputError, UsageError

INDEX_ARG = typer.Argument(..., help="Index folder (made by `qtsearch build-index`).")
K_OPT = typer.Option(10, "-k", "--k", help="Results per query (clamped to the index size).")
MODEL_OPT = typer.Option(None, "--model", "-m",
                         help="Model folder; default: the one recorded in the index. It must be "
                              "the model the index was built with.")
DEVICE_OPT = typer.Option("cpu", help="cpu | cuda | auto. One query encodes in milliseconds "
                                      "on the CPU, which also starts fastest; cuda also "
                                      "searches a flat index on the GPU (batched queries).")
PARAM_OPT = typer.Option(None, "--param", "-p",
                         help="faiss search parameter NAME=VALUE overriding the index's own, "
                              "e.g. nprobe=32 (IVF) or efSearch=256 (HNSW). Repeatable.")
JSON_OPT = typer.Option(False, "--json",
                        help="Print a JSON array, one list of hits per query; each hit is "
                             "{id, score, text, source, line, doc, position}.")


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
    from qtsearch.query.search import Index  # faiss and torch: only for the commands that query

    return Index.open(index, model=model, device=device, params=_params(param))


def _print(results, titles: list[str], as_json: bool) -> None:
    if as_json:
        print_json([[h.to_dict() for h in hits] for hits in results])
        return
    from qtsearch.ui.shell import hits_table

    for hits, title in zip(results, titles, strict=True):
        out.print(hits_table(hits, title))


def _read_stdin() -> list[str]:
    from qtsearch.text.reader import clean_lines

    # bytes, so undecodable input is repaired with a warning like a corpus file, not a crash
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text stream stand-in (tests, embedding applications)
        raw = (line.encode("utf-8", "surrogateescape") for line in sys.stdin)
    queries = list(clean_lines(raw, "<stdin>"))
    if not queries:
        raise InputError("no queries on standard input")
    return queries


def search(
    index: Path = INDEX_ARG,
    queries: list[str] = typer.Argument(
        ..., help="Sentences to search for (quote each one); `-` reads one per line from "
                  "standard input. With --ids: sentence ids whose neighbours to find."),
    k: int = K_OPT,
    ids: bool = typer.Option(False, "--ids",
                             help="QUERIES are ids of stored sentences: find their neighbours "
                                  "(each one left out of its own list)."),
    model: Path | None = MODEL_OPT,
    device: str = DEVICE_OPT,
    param: list[str] | None = PARAM_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Find the stored sentences nearest in meaning to each query sentence.

    Scores are cosine similarities (approximate for quantised indexes). A query of only
    unknown words, or an empty one, is refused (exit 3): it has no meaningful vector."""
    if queries == ["-"]:
        queries = _read_stdin()
    idx = _open(index, model, device, param)
    with idx:
        if ids:
            as_ids = []
            for q in queries:
                try:
                    as_ids.append(int(q))
                except ValueError:
                    raise UsageError(f"--ids: {q!r} is not a sentence id") from None
            results = idx.search_ids(as_ids, k)
            titles = [f"neighbours of {i}" for i in as_ids]
        else:
            results = idx.search(queries, k)
            titles = list(queries)
        _print(results, titles, as_json)


def analogy(
    index: Path = INDEX_ARG,
    a: str = typer.Argument(..., help="Sentence A."),
    b: str = typer.Argument(..., help="Sentence B."),
    c: str = typer.Argument(..., help="Sentence C."),
    k: int = K_OPT,
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
    with _open(index, model, device, param) as idx:
        hits = idx.analogy(a, b, c, k, exclude_inputs=not keep_inputs)
        _print([hits], [f"{a} : {b} :: {c} : ?"], as_json)


def shell(
    index: Path = INDEX_ARG,
    k: int = K_OPT,
    model: Path | None = MODEL_OPT,
    device: str = DEVICE_OPT,
    param: list[str] | None = PARAM_OPT,
) -> None:
    """Search interactively: type a sentence, see its nearest sentences.

    The model and index load once; each line is then one query. :analogy A | B | C,
    :id ID (neighbours of a stored sentence), :ctx ID (a hit in its passage), :k N, :help.
    Ctrl-C cancels the line, Ctrl-D leaves. History is kept in ~/.qtsearch_history
    (the QTSEARCH_HISTORY environment variable names another file)."""
    if k < 1:
        raise UsageError(f"-k must be at least 1 (got {k})")
    with err.status("loading the model and the index…"):
        idx = _open(index, model, device, param)
    from qtsearch.ui.shell import Shell

    with idx:
        code = Shell(idx, k=k, console=out).run()
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(search)
    app.command()(analogy)
    app.command()(shell)
