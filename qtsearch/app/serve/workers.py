"""The worker processes of `serve --workers N`, and how connections are spread over them.

uvicorn's own workers share one listening socket and race to accept on it, and asyncio takes
every connection waiting when its worker wakes: 64 clients that connect together split 45/19
or 16/48 between two workers, and the clients of the busier one wait two to three times as
long (kept-alive connections stay where they landed). Here the workers still share the one
socket, but a worker accepts only while it holds no more connections than any other (each
keeps its count in a shared array), one connection at a time, so they split evenly. A worker
that holds more steps back for a moment (PAUSE) and leaves the connection to the others; one
still waiting after GRACE (a sibling busy for that long, or just dead) is accepted anyway.

The parent binds the socket, starts the workers, starts again any that exits while the server
runs, and on Ctrl-C or SIGTERM stops them all (each finishes its requests, as uvicorn does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import multiprocessing
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from uvicorn.config import STARTUP_FAILURE

log = logging.getLogger("qtsearch")

#: Seconds a worker that holds more connections than another waits before it looks again.
PAUSE = 0.002
#: Seconds a connection may wait for the worker holding the fewest before any worker takes it.
GRACE = 0.05
#: Seconds between two looks of the parent at its workers.
WATCH_EVERY = 0.2
#: A worker's count while it is down or starting: none steps back for it.
DOWN = 1 << 40

#: Each worker's connections (a ctypes array in shared memory: one aligned 64-bit integer is
#: written and read whole, so no lock).
Counts = Any


class Acceptor:
    """Accepts connections on `sock` for one worker (`slot` of `counts`) and hands each to
    `factory`'s protocol, while the worker holds no more of them than any other. `live()`:
    the connections the worker holds."""

    def __init__(self, sock: socket.socket, slot: int, counts: Counts,
                 factory: Callable[[], asyncio.Protocol], live: Callable[[], int]):
        self._sock = sock
        self._slot = slot
        self._counts = counts
        self._factory = factory
        self._live = live
        self._pending = 0  # accepted, their protocol not yet connected
        self._held_back_since: float | None = None  # when this worker began stepping back
        self._last_held_back = 0.0
        self._loop = asyncio.get_running_loop()
        self._opening: set[asyncio.Task[Any]] = set()
        self._resume: asyncio.TimerHandle | None = None
        self._publish: asyncio.TimerHandle | None = None
        sock.setblocking(False)
        self._loop.add_reader(sock.fileno(), self._ready)
        self._tick()

    def held(self) -> int:
        return self._live() + self._pending

    def _tick(self) -> None:
        """Publish this worker's count now and then, so that closed connections show."""
        self._counts[self._slot] = self.held()
        self._publish = self._loop.call_later(0.1, self._tick)

    def _ready(self) -> None:
        """The socket has a connection waiting: take it, or step back for a worker that holds
        fewer."""
        mine = self.held()
        self._counts[self._slot] = mine
        now = time.monotonic()
        if mine > min(self._counts[:]):
            # a new wait, unless this worker was woken for the same one a moment ago (a
            # connection another took meanwhile never wakes it again)
            if self._held_back_since is None or now - self._last_held_back > GRACE:
                self._held_back_since = now
            self._last_held_back = now
            if now - self._held_back_since < GRACE:
                self._loop.remove_reader(self._sock.fileno())
                self._resume = self._loop.call_later(PAUSE, self._listen)
                return
        self._held_back_since = None
        try:
            conn, _ = self._sock.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError as e:  # out of file descriptors, say: try again in a moment
            log.warning("cannot accept a connection: %s", e)
            self._loop.remove_reader(self._sock.fileno())
            self._resume = self._loop.call_later(0.1, self._listen)
            return
        conn.setblocking(False)
        self._pending += 1
        self._counts[self._slot] = mine + 1
        opening = self._loop.create_task(self._loop.connect_accepted_socket(self._factory, conn))
        self._opening.add(opening)
        opening.add_done_callback(functools.partial(self._opened, conn))

    def _opened(self, conn: socket.socket, opening: asyncio.Task[Any]) -> None:
        # done after the protocol's connection_made ran: `live()` counts it from now
        self._opening.discard(opening)
        self._pending -= 1
        if opening.cancelled() or opening.exception() is not None:
            conn.close()

    def _listen(self) -> None:
        self._resume = None
        self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        """Stop accepting (the connections held are the server's to close)."""
        for timer in (self._resume, self._publish):
            if timer is not None:
                timer.cancel()
        self._loop.remove_reader(self._sock.fileno())
        self._counts[self._slot] = DOWN


class BalancedServer(uvicorn.Server):
    """uvicorn's server for one worker, accepting through an Acceptor instead of asyncio's
    own server (which would take every waiting connection)."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket, slot: int,
                 counts: Counts):
        super().__init__(config)
        self._listening = sock
        self._slot = slot
        self._counts = counts
        self._acceptor: Acceptor | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=[])  # the app's lifespan; no listener of uvicorn's own
        config = self.config
        factory = functools.partial(config.http_protocol_class, config=config,
                                    server_state=self.server_state,
                                    app_state=self.lifespan.state)
        self._acceptor = Acceptor(self._listening, self._slot, self._counts, factory,
                                  lambda: len(self.server_state.connections))

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._acceptor is not None:
            self._acceptor.close()
        await super().shutdown(sockets)


def _work(make_app: Callable[[], Any], options: dict[str, Any], sock: socket.socket,
          slot: int, counts: Counts) -> None:
    """One worker process: its own app (index, model) served on the shared socket."""
    BalancedServer(uvicorn.Config(make_app(), **options), sock, slot, counts).run()


def run_workers(make_app: Callable[[], Any], options: dict[str, Any], sock: socket.socket,
                workers: int) -> int:
    """Serve on `sock` (bound, not yet listening) from `workers` processes, each running
    `make_app()` (a module-level function: the processes are spawned), until Ctrl-C or
    SIGTERM; uvicorn.Config `options`. A worker that fails is started again; one that ends
    by itself (it was sent SIGTERM) is not. The exit status: 0, or 1 when a worker could not
    start."""
    context = multiprocessing.get_context("spawn")
    counts = context.RawArray("q", [DOWN] * workers)
    sock.listen(2048)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}

    def start(slot: int) -> multiprocessing.process.BaseProcess:
        counts[slot] = DOWN  # until its Acceptor starts
        process = context.Process(target=_work, args=(make_app, options, sock, slot, counts),
                                  name=f"qtsearch-serve-{slot}")
        process.start()
        return process

    status = 0
    processes: list[multiprocessing.process.BaseProcess | None] = [
        start(slot) for slot in range(workers)]
    try:
        while not stop.wait(WATCH_EVERY) and any(p is not None for p in processes):
            for slot, process in enumerate(processes):
                if process is None or process.is_alive():
                    continue
                counts[slot] = DOWN
                if process.exitcode == 0:
                    processes[slot] = None
                    continue
                if process.exitcode == STARTUP_FAILURE:
                    # its app failed before serving: every other start would fail the same way
                    log.error("a worker process could not start; stopping")
                    status = 1
                    stop.set()
                    break
                log.warning("worker process %d ended (status %s); starting another",
                            process.pid, process.exitcode)
                processes[slot] = start(slot)
    finally:
        running = [p for p in processes if p is not None]
        for process in running:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn finishes the requests in progress
        for process in running:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError):
            sock.close()
    return status
