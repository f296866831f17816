"""Reading the evaluation data files (transfer/, sts/, gutenberg/ of the data folder).

The task files come from several sources and encodings (UTF-8, Latin-1 with stray NEL bytes), so
lines are split on "\\n" only and decoded one by one: UTF-8 first, Latin-1 as the fallback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from qtsearch.core.errors import InputError


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def read_lines(path: Path) -> list[str]:
    """Non-blank lines of a task file (BOM and CR removed; tabs kept: fields may be empty)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError as e:
        raise InputError(f"{path}: task file not found") from e
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror})") from e
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines = [_decode(raw).rstrip("\r") for raw in data.split(b"\n")]
    return [line for line in lines if line.strip()]


def read_tsv(path: Path, columns: Sequence[int], header: bool = False) -> list[list[str]]:
    """The given columns of a tab-separated file; rows with too few fields are an error."""
    rows = []
    lines = read_lines(path)[1 if header else 0 :]
    need = max(columns) + 1
    for n, line in enumerate(lines, start=2 if header else 1):
        fields = line.split("\t")
        if len(fields) < need:
            raise InputError(f"{path}: row {n} has {len(fields)} fields, expected {need} or more")
        rows.append([fields[c].strip() for c in columns])
    return rows


def sample(n: int, limit: int | None, seed: int) -> np.ndarray:
    """Row numbers to keep: all of them, or `limit` drawn at random (sorted, reproducible).

    Task files are often sorted by label, so a slice must be drawn at random, never the head.
    """
    if limit is None or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))
