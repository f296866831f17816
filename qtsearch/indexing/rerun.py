"""A build run again over a finished index: a build killed after its swap, before it exited,
has done all its work, and the same command should say so rather than refuse the folder."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from qtsearch.core.errors import QTSearchError
from qtsearch.encoders.registry import load_encoder
from qtsearch.index.index_folder import file_checksum
from qtsearch.index.manifest import Manifest
from qtsearch.index.names import CONFIG_FILE
from qtsearch.indexing.build_config import IndexConfig
from qtsearch.indexing.state import STATE_FILE
from qtsearch.text.reader import list_files


def built_before(config: IndexConfig, out: Path) -> dict[str, Any] | None:
    """The manifest of the index at `out` when a build of `config` made it (the same options,
    as its config.json records them, the same corpus files by sha256 and the same model by
    fingerprint), else None. The `state.json` a kill right after the swap left is dropped."""
    try:
        saved = json.loads((out / CONFIG_FILE).read_text(encoding="utf-8"))
        manifest = Manifest.read(out)
    except (OSError, ValueError, QTSearchError):
        return None
    asked = json.loads(json.dumps(dataclasses.asdict(config)))
    same = {"out": None, "overwrite": False}  # the folder is this one, however named
    if not isinstance(saved, dict) or {**saved, **same} != {**asked, **same}:
        return None
    corpus = [file_checksum(f) for f in list_files(config.corpus)]
    if [(x["path"], x["sha256"]) for x in corpus] != \
            [(x.get("path"), x.get("sha256")) for x in manifest.corpus]:
        return None
    encoder = load_encoder(config.model, device=config.device, precision=config.precision)
    if encoder.fingerprint != manifest.model.fingerprint:
        return None
    (out / STATE_FILE).unlink(missing_ok=True)
    return manifest.to_dict()
