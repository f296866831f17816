"""What a request may ask of the server, and the JSON errors it gets back.

Every error is `{"error": MESSAGE}` with the message the CLI prints after `qtsearch: error:`
and a status that says whose fault it is: 400 a bad request (query, option, filter), 401 no
token, 403 a wrong token or writing disabled, 404 an unknown sentence id or endpoint, 409 a
request this index cannot serve (e.g. lexical search on an index built before it, /add or
/delete on an index the server cannot write), 413 a request too large (its body, its results,
the stored text it would read, or its answer, each refused before it is built), 500 the
server's own failure, 503 busy (another writer holds the index, too many requests at once, or
a request still working at its deadline), with Retry-After.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from qtsearch.core.budget import OverBudget, OverTime
from qtsearch.core.errors import (
    BusyError,
    DamagedIndex,
    InputError,
    Interrupted,
    OutputError,
    QTSearchError,
    UnusableIndex,
    UsageError,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    """Bounds on one request (the `qtsearch serve` options of the same names)."""

    max_k: int = 1000
    max_queries: int = 100
    max_context: int = 50
    max_body: int = 1 << 20  # bytes of a request body, /add excepted
    max_add_bytes: int = 16 << 20  # bytes of a POST /add body
    #: queries × k of one search: many queries at a large k cost seconds of CPU and a large
    #: answer (docs/reliability.md, "Under load, and against a hostile client")
    max_results: int = 10_000
    max_response_bytes: int = 8 << 20  # bytes of one answer's JSON
    #: characters of stored text one request may read, its candidates included (a search
    #: reads 2-4 rows per result; folding a row takes about 14 times its text in memory)
    max_read_chars: int = 16 << 20
    request_timeout: float = 30.0  # seconds of work for one request; past it, 503
    max_concurrent: int = 64  # requests in progress per worker process; beyond: 503
    #: requests a worker process works on at once, the others waiting their turn: two keep a
    #: long request from holding up the rest, more only contend for the interpreter and
    #: lengthen the tail (docs/serving.md, "Concurrency")
    threads: int = 2
    header_timeout: float = 10.0  # seconds for a request's head (guards.guarded_protocol)
    body_timeout: float = 30.0  # seconds for a request's body (BodyLimit)
    keep_alive_timeout: float = 5.0  # seconds an idle kept-alive connection stays open
    allow_hosts: tuple[str, ...] = ()  # Host names answered besides loopback (guards.Guards)


#: CPU seconds a request costs at least, by what it asks (measured on the reference 2-core
#: machine: docs/serving.md, "Budgets"): each query's encoding, legs and store read; each
#: passage of its first fetch ranked; each text a re-ranker encodes.
SECONDS_PER_QUERY = 2e-3
SECONDS_PER_PASSAGE = 15e-6
SECONDS_PER_RERANKED_TEXT = 8e-3


def least_seconds(queries: int, k: int, by: str, count: int, rerank_depth: int = 0) -> float:
    """The least work, in CPU seconds, of `queries` searches for `k` results `by` passage or
    document on an index of `count` rows, each re-ranking its first `rerank_depth` (0: none):
    its first fetch only, as a search that deepens it costs more."""
    from qtsearch.lifecycle.querying import first_fetch

    reranked = rerank_depth + 1 if rerank_depth else 0  # the query's encoding too
    return queries * (SECONDS_PER_QUERY + first_fetch(k, by, count) * SECONDS_PER_PASSAGE
                      + reranked * SECONDS_PER_RERANKED_TEXT)


class HTTPError(Exception):
    """An error with its HTTP status (and headers, e.g. WWW-Authenticate for a 401)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers


def status_of(error: QTSearchError) -> int:
    """The HTTP status of a qtsearch error raised while answering a request."""
    if isinstance(error, UsageError | InputError):
        return 400
    if isinstance(error, OverBudget):
        return 413
    if isinstance(error, OverTime):  # busy, or asked too much: retry later, or ask for less
        return 503
    if isinstance(error, DamagedIndex):  # the index's failure, not the request's
        return 500
    if isinstance(error, UnusableIndex | OutputError):  # e.g. /add on a read-only index
        return 409
    if isinstance(error, Interrupted | BusyError):  # BusyError: another writer; retry later
        return 503
    return 500


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}, ensure_ascii=False).encode("utf-8")


class BodyLimit:
    """ASGI middleware: a request body over its limit (by Content-Length, or as it arrives)
    is refused with 413 before the application reads it; a body within it is passed on."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int],
                 body_timeout: float = Limits.body_timeout):
        self.app = app
        self.limit_for = limit_for
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > limit:
            await _refuse(send, limit)
            return
        # here, not at the top: `qtsearch serve --help` reads Limits without starting a loop
        import asyncio

        body, more = b"", True
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        while more:
            try:  # a body trickling in at 1 byte/s must not hold a worker for ever
                message = await asyncio.wait_for(
                    receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except asyncio.TimeoutError:
                await _refuse(send, limit, 408, f"request body not received within "
                                                f"{self.body_timeout:g} s")
                return
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > limit:
                await _refuse(send, limit)
                return
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _refuse(send: Send, limit: int, status: int = 413, message: str = "") -> None:
    body = error_body(message or f"request body too large: at most {limit:,} bytes")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
