"""Typed stage configs saved as JSON beside what they produced."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, TypeVar

from qtsearch.core.disk import writing

T = TypeVar("T")


def write_text_atomic(path: Path, text: str) -> None:
    """Write text via a temporary file and rename, so a reader never sees half a file (a full
    disk: OutputError naming `path`, qtsearch.core.disk.writing)."""
    tmp = path.with_name(path.name + ".tmp")
    with writing(path, tmp), open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def with_umask(path: str | os.PathLike) -> None:
    """Give a file the mode the user's umask asks for (0644 under the usual 022). safetensors
    creates its files 0600, so an index or model shared with another user failed to load."""
    mask = os.umask(0o022)  # reading the umask means setting it; set straight back
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def save_tensors(tensors: dict[str, Any], path: Path, meta: dict[str, str] | None = None) -> None:
    """numpy arrays to a safetensors file via a temporary file and rename, with the mode the
    user's umask asks for (safetensors alone writes 0600 straight to the final name)."""
    from safetensors.numpy import save_file

    tmp = path.with_name(path.name + ".tmp")
    with writing(path, tmp):  # safetensors says "os error 28" of a full disk, without a name
        save_file(tensors, str(tmp), meta)
    with_umask(tmp)
    os.replace(tmp, path)


def save_config(config: Any, path: Path) -> None:
    write_json_atomic(path, dataclasses.asdict(config))


def config_from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """A dataclass from its JSON form: unknown keys are ignored (newer files stay readable),
    missing keys take the field's default (older files too)."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{k: v for k, v in data.items() if k in names})


def load_config(cls: type[T], path: Path) -> T:
    """Load a dataclass from a JSON file (see `config_from_dict`)."""
    return config_from_dict(cls, json.loads(Path(path).read_text(encoding="utf-8")))
