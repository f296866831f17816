"""Several training processes on one machine without torchrun: `qtsearch train … --nproc N`
starts `python -m qtsearch` N times with torchrun's environment (qtsearch.training.distributed
joins them into one group), passes signals on, and reports one exit status."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import qtsearch
from qtsearch.core.errors import UsageError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(nproc: int, argv: list[str]) -> int:
    """Run `qtsearch argv` as `nproc` processes on this machine (torchrun's single-node job,
    without its tracebacks) and return the exit status: process 0's, else the first other
    failure's. Process 0 speaks on stdout and stderr; the others' stderr is shown only when
    they fail alone. Each process gets its share of the CPU threads; SIGINT and SIGTERM are
    passed on, so the run stops at the same step everywhere with a checkpoint."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
           "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc)}
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    # the folder holding this qtsearch package, for a checkout run as `python cli.py`
    package_root = str(Path(qtsearch.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile()) for _ in range(nproc - 1)]
        procs = [subprocess.Popen(
            [sys.executable, "-m", "qtsearch", *argv],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=None if r == 0 else subprocess.DEVNULL,
            stderr=None if r == 0 else logs[r - 1],
            start_new_session=True,  # a terminal's Ctrl-C reaches them once: through `forward`
        ) for r in range(nproc)]

        def forward(signum: int, frame: object) -> None:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            codes = wait_all(procs)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
        if codes[0] == 0:
            for log, code in zip(logs, codes[1:]):
                if code != 0:
                    log.seek(0)
                    sys.stderr.write(log.read().decode("utf-8", "replace"))
                    return code
        return codes[0]


def wait_all(procs: list[subprocess.Popen], grace: float = 60.0) -> list[int]:
    """Wait for every process. Once process 0 has failed, the others (waiting for it at a
    collective) are ended at once; once another has, process 0 gets `grace` seconds to finish
    (it may be writing the checkpoint of an interrupted run) before they all are."""
    failed_at: float | None = None
    while any(p.poll() is None for p in procs):
        if procs[0].returncode not in (None, 0):
            break
        if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > grace:
            break
        time.sleep(0.1)
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return [int(p.returncode) for p in procs]


def nproc_option(argv: list[str]) -> tuple[int, list[str]]:
    """(N, argv without it) for a training command's `--nproc N` (1 when absent, and inside a
    job torchrun or `launch` started: its processes are the N)."""
    if not argv or not argv[0].startswith("train"):
        return 1, argv
    rest, value = list(argv), None
    for i, arg in enumerate(rest):
        if arg == "--nproc" and i + 1 < len(rest):
            value = rest[i + 1]
            del rest[i : i + 2]
            break
        if arg.startswith("--nproc="):
            value = arg.split("=", 1)[1]
            del rest[i]
            break
    if value is None:
        return 1, argv
    if not value.isdigit() or int(value) < 1:
        raise UsageError(f"--nproc must be a whole number of processes ≥ 1, not {value!r}")
    return (1 if "WORLD_SIZE" in os.environ else int(value)), rest
