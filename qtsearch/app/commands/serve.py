"""`qtsearch serve`: the HTTP API and search page over one index (extra `[serve]`)."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

import typer

from qtsearch.app.commands.common import RERANK_DEPTH_OPT, err, out
from qtsearch.app.serve.request_limits import Limits
from qtsearch.core.errors import UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: The most worker processes `serve` starts by itself: each holds its own copy of the model.
AUTO_WORKERS = 8


def default_workers(device: str, cores: int) -> int:
    """Worker processes when `--workers` is not given: one per CPU core (a worker's requests
    run Python, one core at a time: docs/serving.md, "Worker processes"), at most
    AUTO_WORKERS; one on a GPU, which each worker would fill with a model of its own."""
    return 1 if device != "cpu" else max(1, min(cores, AUTO_WORKERS))


def serve(
    index: Path = typer.Argument(..., help="Index folder (made by `qtsearch build-index`)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on; the default answers "
                                               "this machine only (0.0.0.0: every network)."),
    port: int = typer.Option(8000, min=1, max=65535, help="TCP port."),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="File holding the bearer token that POST /add and "
                                   "POST /delete require (without it, both are refused with "
                                   "403)."),
    workers: int | None = typer.Option(
        None, min=1, max=64, help="Worker processes, each with its own copy of the model (the "
                                  "index's files are mapped, so shared). Default: one per "
                                  f"CPU core, at most {AUTO_WORKERS}; one unless --device is "
                                  "cpu."),
    device: str = typer.Option("cpu", help="cpu | cuda | auto, for encoding queries."),
    max_k: int = typer.Option(Limits.max_k, min=1, help="Largest k a request may ask for."),
    max_queries: int = typer.Option(Limits.max_queries, min=1,
                                    help="Most queries in one /search request."),
    max_body: int = typer.Option(Limits.max_body, min=1024,
                                 help="Largest request body in bytes (413 above it), /add "
                                      "excepted."),
    max_add_bytes: int = typer.Option(Limits.max_add_bytes, min=1024,
                                      help="Largest POST /add body in bytes."),
    max_results: int = typer.Option(Limits.max_results, min=1,
                                    help="Most results (queries × k) in one /search request "
                                         "(413 above it)."),
    max_read_chars: int = typer.Option(Limits.max_read_chars, min=1,
                                       help="Most characters of stored text one request may "
                                            "read, candidates included (413 above it, before "
                                            "the answer is built)."),
    max_response_bytes: int = typer.Option(Limits.max_response_bytes, min=1024,
                                           help="Largest answer in bytes (413 above it)."),
    request_timeout: float = typer.Option(Limits.request_timeout, min=0.1,
                                          help="Seconds of work one request may take (503 "
                                               "with Retry-After past it)."),
    threads: int = typer.Option(Limits.threads, min=1,
                                help="Requests each worker process works on at once; the "
                                     "others wait their turn (more only contend for "
                                     "the interpreter)."),
    max_concurrent: int = typer.Option(Limits.max_concurrent, min=1,
                                       help="Requests in progress per worker; beyond, 503 with "
                                            "Retry-After."),
    allow_host: list[str] = typer.Option(
        [], "--allow-host", help="A Host name (or address) to answer besides this machine's "
                                 "loopback names and --host; repeatable; * answers any "
                                 "(requests for other names get 400: DNS rebinding)."),
    access_log: bool = typer.Option(False, "--access-log", help="Log every request."),
    rerank: str | None = typer.Option(None, "--rerank",
                                      help="Load this encoder (e.g. minilm) to re-rank the "
                                           "searches that ask for it (rerank=true)."),
    rerank_depth: int = RERANK_DEPTH_OPT,
) -> None:
    """Serve an index over HTTP: a JSON API and a search page.

    GET/POST /search, POST /analogy, GET /sentences/ID?context=N, GET /info, GET /health,
    POST /add and POST /delete (both with the bearer token from --token-file); answers have
    the CLI's --json shapes, errors are {"error": MESSAGE} with an HTTP status. The search
    page is at /, the API's docs at /docs. Ctrl-C stops the server."""
    from qtsearch.app.serve import require_extra

    require_extra()
    import uvicorn

    from qtsearch.app.serve.app import (
        CONFIG_ENV,
        ServeConfig,
        app_from_env,
        create_app,
        read_token,
    )
    from qtsearch.app.serve.guards import server_options
    from qtsearch.app.serve.request_limits import Limits
    from qtsearch.app.serve.workers import run_workers
    from qtsearch.core.device import cpus
    from qtsearch.lifecycle.facade import Index
    from qtsearch.lifecycle.on_disk import read_manifest

    read_manifest(index)  # a missing or broken index fails here, in one line
    if workers is None:
        workers = default_workers(device, cpus())
    if token_file is not None:
        read_token(token_file)
    config = ServeConfig(str(index), device, str(token_file) if token_file else None,
                         Limits(max_k, max_queries, max_body=max_body,
                                max_add_bytes=max_add_bytes, max_results=max_results,
                                max_response_bytes=max_response_bytes,
                                max_read_chars=max_read_chars, request_timeout=request_timeout,
                                max_concurrent=max_concurrent, threads=threads,
                                allow_hosts=(*allow_host, host)), rerank=rerank,
                         rerank_depth=rerank_depth)
    options = {"host": host, "port": port, "access_log": access_log, "log_level": "warning",
               **server_options(config.limits)}  # connection timeouts (serve.guards)
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}/"
    sock = _bind(host, port)  # a taken port fails here, before the model loads
    if host not in LOOPBACK:
        # a wildcard address has no name of its own: the Host allow-list (serve.guards) then
        # holds only loopback and --allow-host, which the user should hear about now
        names = "" if allow_host or host not in ("0.0.0.0", "::") else (
            "; it answers requests for this machine's loopback names only: add --allow-host "
            "NAME for each name clients use")
        err.print(f"qtsearch: warning: listening on {host}: other machines can reach this "
                  f"server (plain HTTP, no TLS){names}", highlight=False, soft_wrap=True)
    if workers == 1:
        with sock:
            app = create_app(config)
            with app.state.served.use() as idx:
                described = idx.describe()
            out.print(f"serving {index} ({described}) at {url} (API docs at {url}docs); "
                      "Ctrl-C stops", highlight=False, soft_wrap=True)
            # uvicorn shuts down gracefully on Ctrl-C, then raises the signal again: as
            # uvicorn.run does, that ends the server normally (exit 0), not as interrupted
            with contextlib.suppress(KeyboardInterrupt):
                uvicorn.Server(uvicorn.Config(app, **options)).run(sockets=[sock])
        return
    # each worker opens the index itself; it is opened here first too, so that damage its
    # open finds fails now, in one line, not in workers that would be started again and again
    with Index.open(index, device=device) as opened:
        described = opened.describe()
    os.environ[CONFIG_ENV] = config.to_json()  # the workers' app_from_env reads it
    out.print(f"serving {index} ({described}) with {workers} worker processes at {url} (API "
              f"docs at {url}docs); Ctrl-C stops", highlight=False, soft_wrap=True)
    if run_workers(app_from_env, options, sock, workers):
        raise typer.Exit(1)


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or one clear line saying why it cannot be."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise UsageError(f"--host {host}: {e.strerror or e}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host} port {port}: {e.strerror or e}") from None
    return sock


def register(app: typer.Typer) -> None:
    app.command()(serve)
