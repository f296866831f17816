"""The FastAPI application of `qtsearch serve`: the JSON API over one index and the page at `/`.

Answers have the CLI's `--json` shapes, built by the same code (qtsearch.lifecycle.answers,
`index_info`): /search and /analogy return what `qtsearch search --json` and `qtsearch analogy
--json` print, /info what `qtsearch info --json` prints. Routes are plain functions, run in
the server's thread pool: many requests share one `Index` at once (qtsearch.app.serve.served).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio.to_thread
import pydantic_core
from fastapi import Depends, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool

from qtsearch.app.serve.bodies import (
    AddBody,
    AnalogyBody,
    DeleteBody,
    SearchBody,
    SearchQuery,
)
from qtsearch.app.serve.error_answers import handle_errors
from qtsearch.app.serve.guards import Guards, check_token
from qtsearch.app.serve.merging import Ask, Merger
from qtsearch.app.serve.request_limits import (
    BodyLimit,
    HTTPError,
    Limits,
    least_seconds,
)
from qtsearch.app.serve.served import ServedIndex, settle_heap
from qtsearch.app.shell import within
from qtsearch.core.blas import ONE_BLAS_THREAD
from qtsearch.core.budget import SEARCH_ADVICE, Budget, OverBudget, OverTime, spending
from qtsearch.core.errors import InputError, UsageError
from qtsearch.core.version import __version__
from qtsearch.lifecycle.answers import (
    Answer,
    answer_analogy,
    answer_ids,
    answer_json,
    answer_queries,
)
from qtsearch.lifecycle.facade import Index
from qtsearch.lifecycle.on_disk import index_info
from qtsearch.lifecycle.querying import Explainer, Record, Reranker, parse_where
from qtsearch.search.defaults import RERANK_DEPTH

STATIC = Path(__file__).resolve().parent / "static"
#: What a /sentences request over a budget can ask for instead (a search: SEARCH_ADVICE).
CONTEXT_ADVICE = "ask for a smaller context"
#: How `qtsearch serve --workers N` hands its settings to the worker processes.
CONFIG_ENV = "QTSEARCH_SERVE_CONFIG"


@dataclasses.dataclass(frozen=True)
class ServeConfig:
    """What `qtsearch serve` was asked for (JSON in CONFIG_ENV for worker processes)."""

    index: str
    device: str = "cpu"
    token_file: str | None = None
    limits: Limits = dataclasses.field(default_factory=Limits)
    warm_up: bool = True
    rerank: str | None = None  # the encoder that re-ranks searches asking for it
    rerank_depth: int = RERANK_DEPTH

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        data = json.loads(text)
        return cls(**{**data, "limits": Limits(**data["limits"])})


class JSON(JSONResponse):
    """A JSON response serialised by pydantic-core: the values json.dumps writes, in the same
    bytes but for the exponent of a number under 1e-4 (0.00001 or 1e-7 for 1e-05 and 1e-07),
    for about a sixth of its CPU (57 → 10 µs for an answer of 10 hits); a number that is not
    finite is written null rather than refused."""

    def render(self, content: Any) -> bytes:
        return pydantic_core.to_json(content, inf_nan_mode="null")


def read_token(path: str | os.PathLike) -> str:
    """The bearer token in a file (surrounding whitespace ignored); refused when empty."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--token-file {path}: cannot read it ({e})") from e
    if len(token) < 16 or any(c.isspace() for c in token):
        raise UsageError(f"--token-file {path}: the token must be one word of at least 16 "
                         "characters (e.g. `python -c 'import secrets; print(secrets."
                         "token_urlsafe())'`)")
    return token


def create_app(config: ServeConfig, served: ServedIndex | None = None) -> FastAPIOffline:
    """The application over `config.index` (opened here unless `served` is given)."""
    limits = config.limits
    token = read_token(config.token_file) if config.token_file else None
    if served is None:
        served = open_served(config)
    reranker = Reranker(config.rerank, config.rerank_depth, config.device) \
        if config.rerank else None

    health_pool = ThreadPoolExecutor(1, thread_name_prefix="qtsearch-health")

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        # the routes' thread pool (anyio's, 40 threads by default): this worker's searches
        anyio.to_thread.current_default_thread_limiter().total_tokens = limits.threads
        settle_heap()  # the app and its index live as long as the worker
        # BLAS on one thread for the worker's life: its requests are the parallelism, and
        # BLAS threads spinning after each small product took the cores other requests
        # needed (docs/serving.md, "Concurrency")
        with ONE_BLAS_THREAD:
            yield
        health_pool.shutdown()
        served.close()  # the server stopped: no request is left

    app = FastAPIOffline(title="qtsearch", version=__version__, redoc_url=None,
                         static_url="/docs-static", lifespan=lifespan,
                         description="Search one index: sentences by meaning and words, "
                                     "neighbours, analogies, context. The page is at /.")
    app.state.served = served
    app.add_middleware(BodyLimit, limit_for=lambda path: (
        limits.max_add_bytes if path == "/add" else limits.max_body),
        body_timeout=limits.body_timeout)
    app.add_middleware(Guards, limits=limits, token=token, bind=None)  # outermost: runs first
    handle_errors(app)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def check_k(k: int) -> None:
        if not 1 <= k <= limits.max_k:
            raise UsageError(f"k must be between 1 and {limits.max_k} (got {k})")

    def budget(advice: str = SEARCH_ADVICE) -> contextlib.AbstractContextManager[Budget]:
        """What one request may read and how long it may work (qtsearch.core.budget)."""
        return spending(Budget(limits.max_read_chars, limits.request_timeout, advice))

    def sized(size: int, advice: str, at_least: bool = False) -> None:
        if size > limits.max_response_bytes:
            raise HTTPError(413, f"answer of {'at least ' if at_least else ''}{size:,} bytes: "
                                 f"at most {limits.max_response_bytes:,} ({advice})")

    def respond(answers: list[Answer], explainer: Explainer | None = None) -> JSON:
        """The CLI's JSON array; 400 when a query failed (the CLI's exit status 3), with the
        other queries still answered in it. Its texts alone over the answer budget are
        refused before the JSON is built."""
        sized(sum(_text_size(hits or []) for _, hits, _ in answers), SEARCH_ADVICE, True)
        body = [answer_json(*a, explainer) for a in answers]
        response = JSON(body, 400 if any(e for _, _, e in answers) else 200)
        sized(len(response.body), SEARCH_ADVICE)
        return response

    def vet(queries: int, k: int, ids: bool, rerank: bool) -> None:
        """A search request's parameters, checked before the index is touched."""
        check_k(k)
        if not queries:
            raise UsageError("no query: give q")
        if rerank and reranker is None:
            raise UsageError("rerank: this server re-ranks nothing (start it with --rerank)")
        if rerank and ids:
            raise UsageError("rerank re-scores query sentences, not ids")
        if queries > limits.max_queries:
            raise HTTPError(413, f"{queries} queries in one request: at most "
                                 f"{limits.max_queries}")
        if queries * k > limits.max_results:
            raise HTTPError(413, f"{queries} queries × k {k} = {queries * k:,} "
                                 f"results in one request: at most {limits.max_results:,}")

    def refuse_sure_misses(queries: int, k: int, by: str, count: int,
                           reranking: Reranker | None = None) -> None:
        """413 for a search sure to run past its deadline, before it starts."""
        least = least_seconds(queries, k, by, count, reranking.depth if reranking else 0)
        if least > limits.request_timeout:
            raise HTTPError(413, f"{queries} queries × k {k}"
                                 f"{' by document' if by == 'doc' else ''}"
                                 f"{' re-ranked' if reranking else ''}: at least "
                                 f"{least:.1f} s of work, over the "
                                 f"{limits.request_timeout:g} s a request may take ("
                                 f"{SEARCH_ADVICE})")

    def search(queries: list[str | int], k: int, mode: str | None,
               where: dict[str, str | int], ids: bool, rerank: bool,
               by: str = "passage", explain: bool = False) -> JSON:
        vet(len(queries), k, ids, rerank)
        with served.use() as idx, budget():
            reranking = within(reranker, len(idx)) if rerank else None
            refuse_sure_misses(len(queries), k, by if not ids else "passage", len(idx),
                               reranking)
            explainer = idx.explainer() if explain else None
            if not ids:
                return respond(answer_queries(idx, [str(q) for q in queries], k, mode, where,
                                              reranking, by), explainer)
            try:
                return respond(answer_ids(idx, [_as_id(q) for q in queries], k, where),
                               explainer)
            except InputError as e:
                raise HTTPError(404, str(e)) from e

    def merged(asks: list[Ask]) -> list[Any]:
        """The outcomes of alike one-query searches (qtsearch.app.serve.merging): answered
        together under one budget as one request's queries are (`answer_queries`: a query at
        fault gets its own error), each response then built under what is left of it. A batch
        that fails (over its budget, past its deadline, or a bug one query meets) and a
        response over what is left are answered alone instead, as each would have been: one
        request's failure is never another's."""
        first = asks[0]
        with served.use() as idx:
            try:
                refuse_sure_misses(1, first.k, first.by, len(idx))
            except HTTPError as e:  # alike asks: every one of them is refused
                return [e] * len(asks)
            with budget() as shared:
                try:
                    found: list[Answer | None] = answer_queries(
                        idx, [a.query for a in asks], first.k, first.mode, dict(first.where),
                        by=first.by)
                except Exception:  # whose fault it is, each request alone tells
                    found = [None] * len(asks)
            return [answered(idx, ask, answer, shared)
                    for ask, answer in zip(asks, found, strict=True)]

    def answered(idx: Index, ask: Ask, answer: Answer | None, shared: Budget) -> Any:
        """One merged request's response (or the exception to raise in it): from its batch's
        `answer` within what is left of the batch's budget, else searched alone."""
        if answer is not None:
            try:
                with spending(shared.rest()):
                    return respond([answer], idx.explainer() if ask.explain else None)
            except (OverBudget, OverTime):
                pass  # over what the batch left: alone, it may be within its own budget
            except Exception as e:
                return e
        try:
            return search([ask.query], ask.k, ask.mode, dict(ask.where), False, False, ask.by,
                          ask.explain)
        except Exception as e:
            return e

    # one batch at a time: two batches of one process only take turns at the interpreter,
    # each then twice as long, and the requests that wait for them too (docs/serving.md)
    merger = Merger(merged, slots=1)

    async def searched(queries: list[str | int], k: int, mode: str | None,
                       where: dict[str, str | int], ids: bool, rerank: bool, by: str,
                       explain: bool) -> JSON:
        """A search request: one query (no ids, no re-ranking) through the merger, any other
        in a thread of its own."""
        if len(queries) != 1 or ids or rerank:
            return await run_in_threadpool(search, queries, k, mode, where, ids, rerank, by,
                                           explain)
        vet(1, k, ids, rerank)
        return await merger.answer(Ask(str(queries[0]), k, mode, tuple(where.items()), by,
                                       explain))

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/search", openapi_extra={"parameters": SearchQuery.parameters()})
    async def search_get(request: Request) -> JSON:
        """The best-matching stored sentences (`by=doc`: documents) for each query:
        `qtsearch search --json` (`explain=true`: with --explain)."""
        a = SearchQuery.read(request.query_params)
        return await searched(list(a.q), a.k, a.mode, parse_where(a.where), a.ids, a.rerank,
                              a.by, a.explain)

    @app.post("/search")
    async def search_post(body: SearchBody) -> JSON:
        """The same as GET /search, with the query or queries in a JSON body."""
        where = body.where if isinstance(body.where, dict) else parse_where(body.where)
        queries = body.q if isinstance(body.q, list) else [body.q]
        return await searched(queries, body.k, body.mode, where, body.ids, body.rerank,
                              body.by, body.explain)

    @app.post("/analogy")
    def analogy(body: AnalogyBody) -> JSON:
        """Sentences D with A : B :: C : D: `qtsearch analogy A B C --json`."""
        check_k(body.k)
        with served.use() as idx, budget():
            return respond([answer_analogy(idx, body.a, body.b, body.c, body.k,
                                           body.keep_inputs)])

    @app.get("/sentences/{id}")
    def sentence(id: int, context: int = 0) -> JSON:
        """Stored sentence `id` with up to `context` sentences on either side of it in its
        document, in order: [{id, text, source, line, doc, position}, ...]."""
        if context > limits.max_context:
            raise UsageError(f"context must be at most {limits.max_context} (got {context})")
        with served.use() as idx, budget(CONTEXT_ADVICE):
            try:
                records = idx.context(id, context)
            except InputError as e:
                raise HTTPError(404, str(e)) from e
        sized(_text_size(records), CONTEXT_ADVICE, True)
        response = JSON([r.to_dict() for r in records])
        sized(len(response.body), CONTEXT_ADVICE)
        return response

    @app.get("/info")
    def info() -> JSON:
        """The index: `qtsearch info INDEX --json`."""
        with served.use() as idx:
            return JSON(index_info(idx.path))

    @app.get("/health")
    async def health() -> JSON:
        """200 while the server answers, with the number of sentences it serves."""
        # On the event loop, not in the thread pool, where it would queue behind every search
        # in progress: one stat of the manifest says whether the served index is current.
        # When the folder changed (an add, maybe by another worker process), the index is
        # opened again in a thread of its own, so the count is never a stale one.
        count = served.current_count()
        if count is None:
            count = await asyncio.get_running_loop().run_in_executor(health_pool,
                                                                     served.fresh_count)
        return JSON({"status": "ok", "sentences": count})

    def authorised(request: Request) -> None:
        """Checked before the body is validated: without the token, nothing about it is said."""
        check_token(request.headers.get("authorization", ""), token, request.url.path)

    @app.post("/add", dependencies=[Depends(authorised)])
    def add(body: AddBody) -> JSON:
        """Append text to the index as `qtsearch add` does (on a copy swapped in whole):
        needs `Authorization: Bearer TOKEN`, the token in the server's --token-file."""
        return JSON(served.add(body.text, body.source, body.split_sentences,
                                       body.format, body.allow_duplicates, body.upsert))

    @app.post("/delete", dependencies=[Depends(authorised)])
    def delete(body: DeleteBody) -> JSON:
        """Delete rows as `qtsearch delete` does, by record id and/or filter (on a copy
        swapped in whole): needs the token of POST /add. Answers {deleted, count, …}."""
        where = [body.where] if isinstance(body.where, str) else body.where
        return JSON(served.delete(
            body.doc_ids, where if isinstance(where, dict) else parse_where(where)))

    return app


def open_served(config: ServeConfig) -> ServedIndex:
    """The index of `config`, opened (and warming up in the background)."""

    def open_index(encoder: Any) -> Index:
        index = Index.open(config.index, model=encoder, device=config.device)
        if config.warm_up:
            index.warm_up()
        return index

    return ServedIndex(config.index, open_index, device=config.device)


def app_from_env() -> FastAPIOffline:
    """The application of one worker process of `qtsearch serve --workers N`."""
    return create_app(ServeConfig.from_json(os.environ[CONFIG_ENV]))


def _as_id(q: str | int) -> int:
    try:
        return int(q)
    except ValueError:
        raise UsageError(f"ids: {q!r} is not a sentence id") from None


def _text_size(hits: Iterable[Record]) -> int:
    """Characters of stored text in `hits` and the passages they carry: a lower bound on
    their JSON's bytes, known before it is built."""
    return sum(len(h.text) + _text_size(getattr(h, "passages", None) or ()) for h in hits)
