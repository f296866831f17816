"""Printing helpers shared by the command modules."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

#: Human output goes to stdout; progress bars and warnings go to stderr.
out = Console()
err = Console(stderr=True)


def print_json(data: Any) -> None:
    """Machine-readable output: plain JSON on stdout, nothing else."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()
