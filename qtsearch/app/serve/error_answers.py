"""Every failure of a route as `{"error": MESSAGE}` with its status
(qtsearch.app.serve.request_limits says which)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from qtsearch.app.serve.request_limits import HTTPError, error_body, status_of
from qtsearch.core.errors import QTSearchError

#: Seconds a 503 (busy) answer asks the client to wait before trying again.
RETRY_AFTER = "5"


def json_error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(message), status, headers, media_type="application/json")


def handle_errors(app: FastAPI) -> None:
    """Every failure as {"error": MESSAGE} with its status (qtsearch.app.serve.request_limits)."""

    @app.exception_handler(QTSearchError)
    async def qtsearch_error(_: Request, e: QTSearchError) -> Any:
        status = status_of(e)
        return json_error(status, str(e), {"Retry-After": RETRY_AFTER} if status == 503
                           else None)

    @app.exception_handler(HTTPError)
    async def http_error(_: Request, e: HTTPError) -> Any:
        return json_error(e.status, str(e), e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, e: RequestValidationError) -> Any:
        first = e.errors()[0] if e.errors() else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p not in ("body", "query", "path"))
        return json_error(400, f"{where}: {first['msg']}" if where else first["msg"])

    @app.exception_handler(HTTPException)
    async def starlette_error(request: Request, e: HTTPException) -> Any:
        message = {404: f"no such endpoint: {request.method} {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}
        return json_error(e.status_code, message.get(e.status_code, str(e.detail)))

    @app.exception_handler(Exception)
    async def internal(_: Request, e: Exception) -> Any:
        return json_error(500, f"internal error: {type(e).__name__}: {e}")
