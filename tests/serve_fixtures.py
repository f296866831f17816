"""A real uvicorn server over a real index, on a free loopback port, for the serve tests.

The server runs in a thread of the test process, on a socket bound to port 0 before it starts
(so no other process can take the port between choosing and binding it); the block's end stops
it the way Ctrl-C does (uvicorn's graceful shutdown, the app's shutdown hook included).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TOKEN = "test-token-0123456789abcdef"


def token_file(folder: Path) -> Path:
    path = folder / "token.txt"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def serving(index: Path, token: Path | None = None, warm_up: bool = False,
            rerank: str | None = None, warmed: bool = False, **limits: Any) -> Iterator[str]:
    """The base URL of a server over `index` while the block runs. No warm-up by default:
    its learned word counts can change a lexical plan (query.lexical), and the answers are
    compared with the CLI's, which never warms up. `warmed`: warmed up before the first
    request, the background part included (the lexical leg then stems every new word)."""
    pytest.importorskip("fastapi", reason="the [serve] extra is not installed")
    import uvicorn

    from qtsearch.app.serve.app import ServeConfig, create_app
    from qtsearch.app.serve.guards import server_options
    from qtsearch.app.serve.request_limits import Limits

    config = ServeConfig(str(index), token_file=str(token) if token else None,
                         limits=Limits(**limits), warm_up=warm_up, rerank=rerank)
    app = create_app(config, _warmed(config) if warmed else None)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           **server_options(config.limits)))  # as serve runs
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _warmed(config: Any) -> Any:
    """The served index of `config`, its warm-up finished before it answers."""
    from qtsearch.app.serve.served import ServedIndex
    from qtsearch.lifecycle.facade import Index

    def open_index(encoder: Any) -> Index:
        index = Index.open(config.index, model=encoder, device=config.device)
        index.warm_up(wait=True)
        return index

    return ServedIndex(config.index, open_index, device=config.device)
