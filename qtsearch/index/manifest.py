"""The index folder layout and its manifest (the contract between builder and query layer)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qtsearch.config import write_json_atomic
from qtsearch.errors import IndexError_

FORMAT = "qtsearch-index"
VERSION = 1
MANIFEST = "manifest.json"
INDEX_FILE = "index.faiss"
META_FILE = "meta.sqlite"
CONFIG_FILE = "config.json"
PARQUET_FILE = "meta.parquet"
INDEX_TYPES = ("flat", "sq8", "ivf-pq", "hnsw")
#: Keys every manifest must have; a reader refuses a manifest missing one.
REQUIRED = ("format", "version", "count", "dim", "index_type", "index_key", "index_params",
            "metric", "model")


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    """The manifest of an index folder; IndexError_ (one clear line) when missing or corrupt."""
    folder = Path(index_dir)
    if not folder.exists():
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
    return data


def write_manifest(index_dir: Path, data: dict[str, Any]) -> None:
    write_json_atomic(Path(index_dir) / MANIFEST, data)
