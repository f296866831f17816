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
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from qtsearch.core.errors import UsageError
from qtsearch.core.progress import Reporter

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


def first_rank_only(reporter: Reporter | None) -> Reporter:
    """`reporter` in the first process of a group (the one that shows anything), a silent one
    in the others and where none is given."""
    return reporter if reporter is not None and env_rank() == 0 else Reporter()


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
