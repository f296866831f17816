"""The bundled demo: WikiText-2 articles (CC BY-SA 3.0, see LICENSE here) indexed with the
shipped model, so a fresh install can search real text with no other files."""

from __future__ import annotations

import json
from pathlib import Path

from qtsearch.core.errors import QTSearchError
from qtsearch.core.progress import Reporter
from qtsearch.encoders.base import default_model_path
from qtsearch.encoders.files import fingerprint
from qtsearch.lifecycle.writers import IndexConfig, build_index

CORPUS = Path(__file__).parent / "wikitext2.txt.gz"

QUERIES = [
    "The army was defeated in the battle and the soldiers retreated.",
    "The song reached number one on the charts.",
    "The storm caused heavy damage along the coast.",
]
#: An analogy v(C) + v(B) - v(A) that the corpus can answer: B swaps the song of A for an
#: album, so the answer is C's sentence about an album ("The album received generally
#: positive reviews."). Sentence analogies are hard for every encoder (ANALOGY_NOTE).
ANALOGY = (
    "The song reached number one.",
    "The album reached number one.",
    "The song was well received by critics.",
)
#: What the analogy benchmark measures, printed after the demo's analogy.
ANALOGY_NOTE = ("analogies add B - A to C and return the sentences nearest to the sum; on "
                "`qtsearch bench analogy` (Yelp sentences that differ by one word pair, e.g. "
                "his/her, good/better) the shipped model's first hit is the right one for 20% "
                "of 1,240 questions and 38% of 500 sentiment rewrites (docs/benchmarks.md)")


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
