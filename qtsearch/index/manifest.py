"""The index folder layout and its manifest (the contract between builder and query layer)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import DamagedIndex, UnusableIndex
from qtsearch.core.version import __version__
from qtsearch.index.names import MANIFEST
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.records import PASSAGE_WORDS, RecordFields

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


def read_manifest(index_dir: str | Path, hash_changed: bool = True) -> dict[str, Any]:
    """The manifest of an index folder; UnusableIndex (one clear line) when missing or corrupt,
    or when a file differs from its record (`integrity.check_open`; `hash_changed` False leaves
    the files whose time changed unhashed, for `check`, which hashes every file anyway)."""
    folder = Path(index_dir)
    if not folder.exists():
        from qtsearch.index.lock import restore_if_missing

        # a writer killed mid-swap left the old index beside the path: put it back
        if not restore_if_missing(folder):
            raise UnusableIndex(f"{folder}: no such index folder")
    if not folder.is_dir():
        raise UnusableIndex(f"{folder}: not an index folder (it is a file)")
    path = folder / MANIFEST
    if not path.is_file():
        raise UnusableIndex(f"{folder}: not a qtsearch index (no {MANIFEST})")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UnusableIndex(f"{path}: corrupt manifest ({e})") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UnusableIndex(f"{path}: not a qtsearch index manifest")
    if data.get("version") != VERSION:
        raise UnusableIndex(f"{path}: index format version {data.get('version')!r} is not "
                          f"supported (this qtsearch reads version {VERSION}); rebuild the index")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise UnusableIndex(f"{path}: corrupt manifest (missing {', '.join(missing)})")
    wrong = shape_problem(data, SHAPE)
    if wrong:
        raise DamagedIndex(f"{path}: corrupt manifest ({wrong}); rebuild the index")
    from qtsearch.index.integrity import FILES, check_open, check_sizes

    # a truncated, replaced or rewritten file fails here, in one line
    (check_open if hash_changed else check_sizes)(folder, data.get(FILES) or {})
    return data


@dataclass(frozen=True, kw_only=True)
class ModelRef:
    """The model an index was built with, as its manifest names it; a key the manifest lacks
    is None."""

    path: str | None = None  # what `load_encoder` takes: a model folder or an encoder's name
    fingerprint: str | None = None
    name: str | None = None
    dim: int | None = None


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """A manifest read by attribute: the keys of SHAPE, typed. An optional key the manifest
    lacks has the value its readers have always taken for it (an index from before the key
    existed reads as it did). `raw` is the dict itself, every key kept (time stamps, build
    notes), so a writer that starts from `to_dict()` loses none; the lists and dicts the
    attributes hold are the manifest's own, not to be changed in place."""

    raw: dict[str, Any] = field(repr=False)
    format: str
    version: int
    count: int
    #: of the stored vectors, after the transform
    dim: int
    index_type: str
    index_key: str
    index_params: dict[str, Any]
    metric: str
    model: ModelRef
    #: the encoder's own dimension (None: an index from before it was recorded)
    model_dim: int | None = None
    #: {relative path: {"bytes": n, "sha256": hex}} ({}: an index from before the record)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the input files, {"path", "sha256", "bytes"} each
    corpus: list[dict[str, Any]] = field(default_factory=list)
    added: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)
    split_sentences: bool = False
    #: a full-text table was written (None: an index from before it was recorded)
    fts: bool | None = None
    docs: str = "file"
    passage_words: int = PASSAGE_WORDS
    #: the records' id, title and text fields (None: the reader's own guess)
    record_fields: tuple[str | None, ...] = (None, None, None)
    transform: dict[str, Any] | None = None
    build: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, float] = field(default_factory=dict)
    input_format: str | None = None

    @classmethod
    def read(cls, index_dir: str | Path, hash_changed: bool = True) -> Manifest:
        """`read_manifest`'s manifest, typed (the same checks, the same one-line errors)."""
        return cls._of(read_manifest(index_dir, hash_changed))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """The typed manifest of `data` (a manifest as compose_manifest makes it); ValueError
        when a REQUIRED key is missing or a key has another shape than SHAPE's."""
        data = dict(data)  # a caller that sets keys of its dict afterwards changes no Manifest
        missing = [k for k in REQUIRED if k not in data]
        wrong = f"missing {', '.join(missing)}" if missing else shape_problem(data, SHAPE)
        if wrong:
            raise ValueError(f"not a manifest: {wrong}")
        return cls._of(data)

    @classmethod
    def _of(cls, data: dict[str, Any]) -> Manifest:
        """`data`, whose keys are checked, typed; missing optional keys get their defaults."""
        own = {"raw", "model", "record_fields"}  # not read as they are stored
        kept = {f.name: data[f.name] for f in fields(cls) if f.name not in own and f.name in data}
        if data.get("record_fields"):  # [] names no fields, as (None, None, None) does
            kept["record_fields"] = tuple(data["record_fields"])
        model = ModelRef(**{f.name: data["model"].get(f.name) for f in fields(ModelRef)})
        return cls(raw=data, model=model, **kept)

    def to_dict(self) -> dict[str, Any]:
        """The manifest as read, unknown keys included: what a writer updates and writes back."""
        return dict(self.raw)

    def read_options(self, split: bool | None = None) -> ReadOptions:
        """How the index read its corpus (records' passages and fields, running text's
        document unit, the input format), for `read_sentences`: `add` reads more text the same
        way. `split` None: as the index was built (`split_option` says what `add` asks)."""
        options = ReadOptions(self.split_sentences if split is None else split, docs=self.docs,
                              passage_words=self.passage_words,
                              fields=RecordFields(*self.record_fields))
        # an index from before the format was recorded: the reader's own default
        return options if self.input_format is None else replace(options, fmt=self.input_format)

    @property
    def fit(self) -> str:
        """The transform's spec, as `--fit` takes it ("none": the encoder's own vectors)."""
        return (self.transform or {}).get("spec", "none")


def write_manifest(index_dir: Path, data: dict[str, Any]) -> None:
    """Write the manifest, last of an index's files: it records every other file's size and
    sha256 (qtsearch.index.integrity), which `qtsearch check` verifies and every open compares
    sizes with."""
    from qtsearch.index.integrity import FILES, record

    write_json_atomic(Path(index_dir) / MANIFEST, {**data, FILES: record(index_dir)})


def read_options_fields(options: ReadOptions) -> dict[str, Any]:
    """The keys of the manifest that record how a build read its corpus (what
    `Manifest.read_options` gives back)."""
    f = options.fields
    return {"split_sentences": options.split, "input_format": options.fmt, "docs": options.docs,
            "passage_words": options.passage_words, "record_fields": [f.id, f.title, f.text]}


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
