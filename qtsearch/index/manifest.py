"""The index folder layout and its manifest (the contract between builder and query layer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import IndexError_
from qtsearch.core.version import __version__
from qtsearch.index.names import MANIFEST

FORMAT = "qtsearch-index"
VERSION = 1
#: Keys every manifest must have; a reader refuses a manifest missing one.
REQUIRED = ("format", "version", "count", "dim", "index_type", "index_key", "index_params",
            "metric", "model")


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    """The manifest of an index folder; IndexError_ (one clear line) when missing or corrupt."""
    folder = Path(index_dir)
    if not folder.exists():
        from qtsearch.index.lock import restore_if_missing

        # a writer killed mid-swap left the old index beside the path: put it back
        if not restore_if_missing(folder):
            raise IndexError_(f"{folder}: no such index folder")
    if not folder.is_dir():
        raise IndexError_(f"{folder}: not an index folder (it is a file)")
    path = folder / MANIFEST
    if not path.is_file():
        raise IndexError_(f"{folder}: not a qtsearch index (no {MANIFEST})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise IndexError_(f"{path}: corrupt manifest ({e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise IndexError_(f"{path}: not a qtsearch index manifest")
    if data.get("version") != VERSION:
        raise IndexError_(f"{path}: index format version {data.get('version')!r} is not "
                          f"supported (this qtsearch reads version {VERSION}); rebuild the index")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise IndexError_(f"{path}: corrupt manifest (missing {', '.join(missing)})")
    from qtsearch.index.integrity import check_sizes

    check_sizes(folder, data)  # a truncated or replaced file fails here, in one line
    return data


def write_manifest(index_dir: Path, data: dict[str, Any]) -> None:
    """Write the manifest, last of an index's files: it records every other file's size and
    sha256 (qtsearch.index.integrity), which `qtsearch check` verifies and every open compares
    sizes with."""
    from qtsearch.index.integrity import FILES, record

    write_json_atomic(Path(index_dir) / MANIFEST, {**data, FILES: record(index_dir)})


def now() -> str:
    """The manifest's time stamps: UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def compose_manifest(base: Mapping[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """The one way a manifest is made, by a build, a derived build and `add` alike: `base` (the
    source index's manifest, if any) updated with `fields`, stamped with this format, version
    and qtsearch version, and checked for every REQUIRED key, so the writers cannot drift."""
    data = {"format": FORMAT, "version": VERSION, **(base or {}), **fields}
    data.update(format=FORMAT, version=VERSION, qtsearch_version=__version__)
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise ValueError(f"manifest without {', '.join(missing)}")
    return data
