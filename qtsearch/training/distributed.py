"""Training on several processes: `torchrun --nproc-per-node N -m qtsearch train …`, or
`qtsearch train … --nproc N`, which starts the N processes itself (`launch`).

Data parallel over whole batches: an optimiser step of a run with G batches per step trains on
the task's batches p·G … p·G+G−1 (p: the step's position within its task), and process r of W
computes the contiguous share r·G/W … (r+1)·G/W−1 of them. The gradients are averaged over the
G batches by one all-reduce (explicit rather than DistributedDataParallel: each step trains one
of several tasks, whose heads the others leave without a gradient), so every process applies the
same update and the run does not depend on W: one process with G batches per step computes the
same steps. Every process validates (the same figures); process 0 alone writes checkpoints,
metrics and progress. The other processes start building their data once process 0 has reached
the loop, so the caches (tokenised corpus, teacher vectors) are built once and then read.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

import qtsearch
from qtsearch.core.errors import UsageError

#: How long a process waits for the others at a collective: process 0 builds the caches while
#: the others wait, which may take long on a large corpus.
TIMEOUT = timedelta(hours=2)


@dataclass(frozen=True)
class World:
    """This process's place among the training processes (rank 0 of 1 when alone)."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        """The process that writes checkpoints, metrics and progress."""
        return self.rank == 0

    def share(self, first: int, count: int) -> range:
        """This process's contiguous share of the `count` batches from batch `first`."""
        return range(first + self.rank * count // self.size,
                     first + (self.rank + 1) * count // self.size)


def env_rank() -> int:
    """The rank torchrun (or `launch`) gave this process; 0 outside a group."""
    return int(os.environ.get("RANK", "0"))


def join(device: str) -> World:
    """Join the process group the environment describes (WORLD_SIZE > 1), once per process:
    NCCL on GPUs (process i uses GPU LOCAL_RANK), gloo on the CPU."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size())
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return World()
    cuda = device != "cpu" and torch.cuda.is_available()
    if cuda:
        local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
        if local >= gpus:
            raise UsageError(f"process {local} of this machine has no GPU of its own ({gpus} "
                             "visible): start at most one process per GPU, or use --device cpu")
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)
    atexit.register(dist.destroy_process_group)
    return World(dist.get_rank(), dist.get_world_size())


def wait_for_main(world: World) -> None:
    """The other processes wait here (before reading any data) until process 0 has built the
    caches and reached the loop (`release_others`)."""
    if world.size > 1 and not world.main:
        dist.barrier()


def release_others(world: World) -> None:
    """Process 0, in the loop: its data is ready; the others may build theirs from its caches."""
    if world.size > 1 and world.main:
        dist.barrier()


def broadcast_modules(modules: dict[str, nn.Module], world: World) -> None:
    """Every process starts from process 0's weights (the same seed gives them anyway; this
    makes sure)."""
    if world.size == 1:
        return
    for module in modules.values():
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)


def reduce_step(params: Sequence[nn.Parameter], world: World,
                figures: list[float]) -> list[float]:
    """Sum `figures` and the gradients over the processes (each process's gradients are
    already divided by the step's batch count, so the sum is the mean). A parameter without
    a gradient anywhere keeps none (Adam then leaves it alone, as on one process)."""
    if world.size == 1:
        return figures
    device = params[0].device
    head = torch.tensor([p.grad is not None for p in params] + figures, dtype=torch.float64,
                        device=device)
    dist.all_reduce(head)
    live = [p for p, has in zip(params, head[: len(params)].tolist()) if has > 0]
    for p in live:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    if live:
        flat = torch.cat([p.grad.reshape(-1) for p in live])
        dist.all_reduce(flat)
        offset = 0
        for p in live:
            p.grad.copy_(flat[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
    return head[len(params):].tolist()


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
