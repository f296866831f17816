"""The bundled demo: WikiText-2 articles (CC BY-SA 3.0, see LICENSE here) indexed with the
shipped model, so a fresh install can search real text with no other files."""

from __future__ import annotations

import json
from pathlib import Path

from qtsearch.core.errors import QTSearchError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import default_model_path
from qtsearch.encoders.files import fingerprint
from qtsearch.indexing.pipeline import IndexConfig, build_index

CORPUS = Path(__file__).parent / "wikitext2.txt.gz"

QUERIES = [
    "The army was defeated in the battle and the soldiers retreated.",
    "The song reached number one on the charts.",
    "The storm caused heavy damage along the coast.",
]
ANALOGY = (
    "He was the king of the country.",
    "She was the queen of the country.",
    "He was a famous actor.",
)


def ensure_demo_index(out: Path, reporter: Reporter | None = None) -> Path:
    """Build the demo index at `out` unless one built with the shipped model is already there.

    `reporter` takes the build's progress and notes (the CLI draws them on stderr: a reader of
    stdout that stops early must not cut a build short)."""
    manifest = out / "manifest.json"
    if manifest.is_file():
        try:
            built_with = json.loads(manifest.read_text())["model"]["fingerprint"]
            if built_with == fingerprint(default_model_path()):
                return out
        except (QTSearchError, KeyError, ValueError, OSError):
            pass  # unreadable or stale: rebuild it
    build_index(IndexConfig(corpus=[str(CORPUS)], out=str(out), overwrite=True), reporter)
    return out
