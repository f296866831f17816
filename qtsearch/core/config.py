"""Typed stage configs saved as JSON beside what they produced."""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from qtsearch.core.disk import writing

if TYPE_CHECKING:  # numpy is imported by `mapped_tensors` alone: the CLI reads configs without it
    import numpy as np

T = TypeVar("T")
#: safetensors' dtype names that numpy holds as they are (no bf16 in numpy)
_DTYPES = {"F16": "float16", "F32": "float32", "F64": "float64", "I8": "int8", "U8": "uint8",
           "I32": "int32", "I64": "int64"}


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


def mapped_tensors(path: str | os.PathLike, whole: bool = False
                   ) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """(metadata, tensors) of a safetensors file, the tensors read-only views of the file
    mapped into memory: nothing is copied, and a page is read when first touched (the
    safetensors library copies each tensor it reads: all of a model's word table, where a
    query reads a few of its rows). `whole`: every page mapped at once,
    for a caller about to read them all (one call, not a page fault a page). Files are
    written whole and renamed (`save_tensors`), so a mapping never sees one change.
    ValueError for a file that is not safetensors (its header, metadata or a tensor's entry
    malformed, a tensor outside the file), or holds a dtype numpy lacks; OSError where it
    cannot be read. The metadata is str -> str, as the safetensors library checks it."""
    import numpy as np

    with open(path, "rb") as fh:
        if whole and hasattr(mmap, "MAP_POPULATE"):
            data = mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE,
                             prot=mmap.PROT_READ)
        else:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    if not isinstance(header, dict):
        raise ValueError("no safetensors header")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("its metadata is not a map of strings")
    tensors = {}
    for name, info in header.items():
        try:
            kind = info["dtype"]
            begin, end = (8 + size + int(o) for o in info["data_offsets"])
            shape = tuple(int(n) for n in info["shape"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"tensor {name}: a malformed entry ({e!r})") from e
        if kind not in _DTYPES:
            raise ValueError(f"tensor {name}: dtype {kind!r} is not supported")
        dtype = np.dtype(_DTYPES[kind])
        count = int(np.prod(shape, dtype=np.int64))
        if begin < 8 + size or end - begin != count * dtype.itemsize or end > len(data):
            raise ValueError(f"tensor {name} does not fit its bytes")
        tensors[name] = np.frombuffer(data, dtype, count, begin).reshape(shape)
    return meta, tensors


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
