"""Device and precision choice, shared by training, embedding and indexing.

torch is imported by the functions that need it, not here: a search on the CPU with a model
that runs without torch (qtsearch.encoders.mean) never loads it (its import costs seconds:
docs/benchmarks.md, "Start-up").
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from qtsearch.core.errors import UsageError

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")


@dataclass(frozen=True)
class Cpu:
    """Where an encoder that runs without torch (numpy) works: `type` and `str()` read as
    torch.device("cpu")'s do, for the code that asks where an encoder runs."""

    type: str = "cpu"

    def __str__(self) -> str:
        return self.type


def check_device(name: str) -> None:
    if name not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {name!r}")


#: Device files an NVIDIA driver makes (Linux; WSL's GPU shows as /dev/dxg). Where none is
#: there torch cannot see a CUDA GPU either.
NVIDIA_DEVICE_FILES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU, answered without importing torch (seconds, a large
    share of a small build) on a Linux machine with no NVIDIA device file."""
    if sys.platform.startswith("linux") and "torch" not in sys.modules and not any(
            os.path.exists(f) for f in NVIDIA_DEVICE_FILES):
        return False
    import torch

    return torch.cuda.is_available()


def resolve_device(name: str = "auto") -> torch.device:
    check_device(name)
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but no CUDA GPU is visible to torch")
    return torch.device(name)


def placement(name: str = "auto") -> torch.device | Cpu:
    """Where work asked for on device `name` runs: `Cpu()`, decided without importing torch
    where no GPU can be there, or the torch device `resolve_device` gives."""
    check_device(name)
    if name == "cpu" or (name == "auto" and not cuda_available()):
        return Cpu()
    return resolve_device(name)


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether the CPU has AVX512-BF16 or AMX, which make bf16 matmuls faster than fp32
    (docs/training.md)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = fh.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The autocast dtype to use, or None for plain fp32."""
    if precision not in PRECISIONS:
        raise UsageError(f"--precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "fp32":
        return None
    import torch

    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    return torch.bfloat16 if cpu_has_bf16() else None


def cpus() -> int:
    """CPUs this process may run on (its affinity, which containers often narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
