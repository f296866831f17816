"""What a hostile or careless client cannot do to `qtsearch serve`.

`Guards` is the outermost ASGI middleware, so each check runs before anything reads the body:

- **Host allow-list.** A request whose `Host` is not this machine's loopback name, the address
  the server listens on, or a name given with `--allow-host` is refused (400): a web page
  whose DNS name is re-bound to 127.0.0.1 cannot read the API from a browser.
- **HEAD** is answered wherever GET is, with GET's status and headers and no body.
- **The token before the body.** POST /add or /delete without the right bearer token is
  refused before a byte of its (up to 16 MB) body is read.
- **Bounded concurrency.** Beyond `max_concurrent` requests in progress, a request is answered
  503 at once, with Retry-After, instead of queueing behind them (the queue is what pushed
  tail latency to seconds): clients back off, the server's memory stays bounded.

`protocol()` adds what uvicorn's HTTP protocols lack: a connection must deliver a request's headers
within `header_timeout` seconds of connecting or of starting them (idle connections and headers at 1
byte/s are closed); `BodyLimit` (qtsearch.app.serve.request_limits) gives the body `body_timeout`
seconds; uvicorn's own `timeout_keep_alive` closes idle keep-alive connections. `server_options`
collects those settings for `uvicorn.Config`.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools is optional in uvicorn
    HttpToolsProtocol = None

from qtsearch.app.serve.request_limits import (
    ASGIApp,
    HTTPError,
    Limits,
    Message,
    Receive,
    Scope,
    Send,
    error_body,
)

#: Host names every server answers to: this machine, by name and by loopback address.
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: Seconds a 503 asks the client to wait.
RETRY_AFTER = 1
#: Paths always answered, even at the concurrency limit: liveness checks must not fail
#: because the server is busy.
EXEMPT = frozenset({"/health"})


def host_name(header: str) -> str:
    """The name in a Host header, without its port: `[::1]:8000` → `::1`, `a.b:80` → `a.b`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header[1:]
    if header.count(":") == 1:
        return header.rsplit(":", 1)[0]
    return header


def allowed_hosts(bind: str | None, extra: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The names a server listening on `bind` answers to: loopback, `bind` itself unless it is
    a wildcard (0.0.0.0, ::), and `extra` (`*` among them: any name)."""
    names = set(LOOPBACK_HOSTS) | {host_name(h) if not _is_ip(h) else h.strip("[]").lower()
                                   for h in extra}
    if bind and bind not in ("0.0.0.0", "::", ""):
        names.add(bind.strip("[]").lower())
    return frozenset(names)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return False
    return True


#: The endpoints that change the index, each behind the bearer token: what it is called when
#: the server has none.
WRITERS = {"/add": "adding", "/delete": "deleting"}


def check_token(authorization: str, token: str | None, path: str = "/add") -> None:
    """The bearer token of a writing endpoint (WRITERS); HTTPError (401/403) when missing or
    wrong."""
    if token is None:
        raise HTTPError(403, f"{WRITERS.get(path, 'writing')} is disabled: start the server "
                             "with --token-file FILE")
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise HTTPError(401, f"POST {path} needs the header 'Authorization: Bearer TOKEN'",
                        {"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise HTTPError(403, "wrong token")


async def send_error(send: Send, status: int, message: str,
                     headers: dict[str, str] | None = None, body: bool = True) -> None:
    """An error answer ({"error": MESSAGE}) that also closes the connection: the client may
    still be sending a body we will not read."""
    data = error_body(message)
    pairs = [(b"content-type", b"application/json"),
             (b"content-length", str(len(data)).encode()), (b"connection", b"close")]
    pairs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": pairs})
    await send({"type": "http.response.body", "body": data if body else b""})


class Guards:
    """ASGI middleware: the checks in the module docstring, in that order."""

    def __init__(self, app: ASGIApp, limits: Limits, token: str | None = None,
                 bind: str | None = "127.0.0.1"):
        self.app = app
        self.limits = limits
        self.token = token
        self.hosts = allowed_hosts(bind, tuple(limits.allow_hosts))
        self.any_host = "*" in limits.allow_hosts
        self.in_flight = 0
        global header_timeout
        header_timeout = limits.header_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        head = scope["method"] == "HEAD"
        if sum(k.lower() == b"host" for k, _ in scope.get("headers") or []) > 1:
            # which one counts differs between proxies: the allow-list must not be guessed past
            await send_error(send, 400, "more than one Host header", body=not head)
            return
        host = headers.get("host")
        if host is not None and not self.any_host and host_name(host) not in self.hosts:
            await send_error(send, 400, f"Host {host_name(host)!r} is not served here (this "
                             "server answers "
                             f"{', '.join(sorted(self.hosts))}; start it with --allow-host "
                             f"{host_name(host)} to add it)", body=not head)
            return
        if head:  # answered as GET, without the body
            scope = {**scope, "method": "GET"}
            send = _without_body(send)
        if scope["method"] == "POST" and scope["path"] in WRITERS:
            try:
                check_token(headers.get("authorization", ""), self.token, scope["path"])
            except HTTPError as e:
                await send_error(send, e.status, str(e), e.headers)
                return
        if scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limits.max_concurrent:
            await send_error(send, 503, f"server busy: {self.in_flight} requests in progress "
                             f"(at most {self.limits.max_concurrent}); retry in "
                             f"{RETRY_AFTER} s", {"Retry-After": str(RETRY_AFTER)},
                             body=not head)
            return
        self.in_flight += 1  # one event loop: no lock needed
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1


def _without_body(send: Send) -> Send:
    async def head_send(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head_send


# -------------------------------------------------------------------------------------------
# Connection timeouts


#: Seconds a connection has to deliver a request head; set from the Limits by `server_options`
#: and by `Guards` (which every worker process builds, so it reaches spawned workers too).
header_timeout = 10.0


class _HeadTimeout:
    """Mixed into uvicorn's HTTP protocol classes: closes a connection that has not delivered a
    whole request head within `header_timeout` seconds of connecting, or of sending the first
    byte of a later request on a kept-alive connection. uvicorn itself waits for ever."""

    _head_timer: asyncio.TimerHandle | None = None

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        app = self.app

        async def started(scope: Scope, receive: Receive, send: Send) -> None:
            self._disarm()  # the head arrived: the app runs (BodyLimit times the body)
            await app(scope, receive, send)

        self.app = started

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._arm()  # the first bytes of another request on a kept-alive connection
        super().data_received(data)  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class GuardedH11(_HeadTimeout, H11Protocol):
    pass


GuardedHttpTools: type | None = None
if HttpToolsProtocol is not None:
    class GuardedHttpTools(_HeadTimeout, HttpToolsProtocol):  # type: ignore[no-redef]
        pass


def protocol() -> type:
    """uvicorn's fastest HTTP protocol class with the head timeout (classes defined at import,
    so that `serve --workers N` can hand them to its worker processes by name)."""
    return GuardedHttpTools or GuardedH11


def server_options(limits: Limits) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments that bound how long a connection may take."""
    global header_timeout
    header_timeout = limits.header_timeout
    return {"http": protocol(),
            "timeout_keep_alive": limits.keep_alive_timeout,
            "timeout_graceful_shutdown": 10}
