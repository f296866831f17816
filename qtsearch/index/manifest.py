"""The index folder layout and its manifest (the contract between builder and query layer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import DamagedIndex, IndexError_
from qtsearch.core.version import __version__
from qtsearch.index.names import MANIFEST

FORMAT = "qtsearch-index"
VERSION = 1
#: Keys every manifest must have; a reader refuses a manifest missing one.
REQUIRED = ("format", "version", "count", "dim", "index_type", "index_key", "index_params",
            "metric", "model")


class Count:
    """A whole number of 0 or more (JSON true is not one, though Python's bool is an int)."""


#: What each key the readers use holds: a type, a Count, {key: shape} (a JSON object whose
#: listed keys, where present, have their shapes; "*": every value), or [shape] (a list).
#: Keys not listed are not checked (time stamps, build notes); REQUIRED says which must be
#: there. Checked on every read, so that a hand-edited manifest fails here in one line
#: instead of deep in a command.
_FILE = {"*": {"bytes": Count, "sha256": str}}
_INPUT = {"path": str, "sha256": str, "bytes": Count}
SHAPE: dict[str, Any] = {
    "format": str, "version": int, "count": Count, "dim": Count, "model_dim": Count,
    "index_type": str, "index_key": str, "index_params": {}, "metric": str,
    "model": {"path": str, "fingerprint": str, "name": str, "dim": Count},
    "files": _FILE, "corpus": [_INPUT], "added": [{}], "deleted": [{}],
    "split_sentences": bool, "fts": bool, "docs": str, "passage_words": Count,
    "record_fields": [(str, type(None))], "transform": ({}, type(None)),
    "build": {}, "stages": {}, "input_format": str,
}


def shape_problem(value: Any, shape: Any, where: str = "") -> str | None:
    """What in `value` does not have its `shape` (see SHAPE), in a few words; None if
    nothing."""
    if isinstance(shape, tuple):  # one of several shapes
        found = [shape_problem(value, s, where) for s in shape]
        return None if None in found else found[0]
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return _wrong(value, "an object", where)
        for key, item in value.items():
            inner = shape.get(key, shape.get("*"))
            found = None if inner is None else \
                shape_problem(item, inner, f"{where}.{key}" if where else str(key))
            if found:
                return found
        return None
    if isinstance(shape, list):
        if not isinstance(value, list):
            return _wrong(value, "a list", where)
        return next((p for i, item in enumerate(value)
                     if (p := shape_problem(item, shape[0], f"{where}[{i}]"))), None)
    if shape is Count:
        ok = type(value) is int and value >= 0
        return None if ok else _wrong(value, "a whole number of 0 or more", where)
    if shape is int or shape is float:
        return None if type(value) is shape else _wrong(value, shape.__name__, where)
    return None if isinstance(value, shape) else _wrong(
        value, {str: "a string", bool: "true or false"}.get(shape, shape.__name__), where)


def _wrong(value: Any, want: str, where: str) -> str:
    return f"{where} is {json.dumps(value)[:40]} where {want} belongs"


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
    wrong = shape_problem(data, SHAPE)
    if wrong:
        raise DamagedIndex(f"{path}: corrupt manifest ({wrong}); rebuild the index")
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
