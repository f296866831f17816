"""Systems side by side on retrieval collections: one index per collection and model, built from
the collection's corpus file exactly as `qtsearch build-index FILE --model M` would, and every
chosen mode searched one query at a time (timed). BEIR collections (`beir.py`) are records
searched by document (`search --by doc`); answer collections (`answer_retrieval.py`, from a
SQuAD-format file) are sentences, one paragraph a document, searched sentence by sentence.

Systems are those of `qtsearch bench relevance` (qtsearch.evaluation.relevance.relevance_run): each
model in every mode, each baseline encoder in semantic mode, and "BM25 (lexical)" once.
Indexes are cached under `$QTSEARCH_CACHE/retrieval/` per corpus, encoder, passage size and the
code from text to index, so a rerun only searches.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from qtsearch.core.errors import InputError, QTSearchError
from qtsearch.core.paths import cache_dir
from qtsearch.core.progress import Reporter
from qtsearch.evaluation.relevance.indexes import build_code_key, encoder_key
from qtsearch.evaluation.relevance.relevance_run import LEXICAL, System, WarningCounter
from qtsearch.evaluation.retrieval import answer_retrieval, beir
from qtsearch.lifecycle import Hit, Index, SearchSettings
from qtsearch.lifecycle.on_disk import Manifest
from qtsearch.lifecycle.querying import query_encoder
from qtsearch.lifecycle.writers import build_folder
from qtsearch.text.records import PASSAGE_WORDS


class Collection(Protocol):
    """What the runner needs of a collection: its corpus file and how to index it, its
    queries, how to search them and how to score one query's hits."""

    name: str
    split: str
    corpus: Path
    by: str
    metrics: tuple[str, ...]
    depth: int
    input_format: str
    keeps_passage_words: bool

    @property
    def queries(self) -> dict[str, str]: ...

    def score(self, qid: str, hits: Sequence[Hit]) -> dict[str, float]: ...


def load_collection(path: str | Path, split: str | None = None) -> Collection:
    """A BEIR folder, or a SQuAD-format file for answer retrieval (default split: dev)."""
    if answer_retrieval.is_answer_file(path):
        return answer_retrieval.load(path, split or "dev")
    return beir.load(path, split)


@dataclass
class RetrievalRun:
    """{collection: {system label: {metric: value, "p50_ms": …}}} and what was built."""

    collections: list[Collection]
    systems: list[System]
    passage_words: int = PASSAGE_WORDS
    results: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"results": self.results, "builds": self.builds,
                "collections": {c.name: {"split": c.split, "queries": len(c.queries),
                                         "published_test_ndcg10": beir.PUBLISHED.get(c.name, {})}
                                for c in self.collections},
                "systems": [{"label": s.label, "model": s.model, "mode": s.mode}
                            for s in self.systems],
                "passage_words": self.passage_words}


def _model_arg(model: str) -> str | None:
    return None if model == "default" else model


def collection_index(coll: Collection, model: str | None, name: str, fingerprint: str,
                     passage_words: int = PASSAGE_WORDS, device: str = "auto",
                     rebuild: bool = False,
                     reporter: Reporter | None = None) -> tuple[Path, bool]:
    """(index folder, whether it was built now) of the collection's corpus with `model`."""
    if not coll.keeps_passage_words:
        passage_words = 0
    digest = hashlib.sha256(
        f"{coll.corpus.resolve()}|{coll.corpus.stat().st_size}|{fingerprint}|{passage_words}|"
        f"{build_code_key()}".encode()).hexdigest()[:16]
    folder = cache_dir("retrieval", "indexes") / f"{coll.name}-{name}-{digest}"
    if not rebuild:
        try:
            Manifest.read(folder)
            return folder, False
        except QTSearchError:
            pass
    build_folder(coll.corpus, folder, model, reporter=reporter, device=device, overwrite=True,
                 input_format=coll.input_format, passage_words=passage_words)
    return folder, True


def run_queries(index: Index, coll: Collection, mode: str,
                advance: Callable[[int], None] | None = None,
                settings: SearchSettings | None = None) -> dict[str, float]:
    """Every query of the collection, searched one at a time as the collection asks (by
    document or by sentence, with `settings`: None, the index's own); a query the index
    refuses (InputError, e.g. no known word in semantic mode) scores 0 and counts in
    `failed`."""
    totals = dict.fromkeys(coll.metrics, 0.0)
    times, failed = [], 0
    with WarningCounter().attached():
        for qid, text in coll.queries.items():
            start = time.perf_counter()
            try:
                hits = index.search(text, coll.depth, mode, by=coll.by, settings=settings)
            except InputError:
                hits, failed = [], failed + 1
            times.append(time.perf_counter() - start)
            for m, v in coll.score(qid, hits).items():
                totals[m] += v
            if advance:
                advance(1)
    n = len(coll.queries)
    return {**{m: v / n for m, v in totals.items()}, "queries": float(n),
            "failed": float(failed), "p50_ms": 1000 * statistics.median(times)}


def run_benchmark(collections: Sequence[Collection], systems: Sequence[System],
                  passage_words: int = PASSAGE_WORDS, device: str = "auto",
                  rebuild: bool = False, reporter: Reporter | None = None) -> RetrievalRun:
    """Build (or reuse) each collection's index per model and score every system on it, one
    stage of `reporter` per system."""
    reporter = reporter or Reporter()
    run = RetrievalRun(list(collections), list(systems), passage_words)
    lexical_on = next((s.model for s in systems if s.mode != LEXICAL), systems[0].model)
    by_model: dict[str, list[System]] = {}
    for s in systems:
        by_model.setdefault(lexical_on if s.mode == LEXICAL else s.model, []).append(s)
    encoders = {m: query_encoder(_model_arg(m), device) for m in by_model}
    for coll in collections:
        run.results[coll.name] = {}
        for model, chosen in by_model.items():
            encoder = encoders[model]
            start = time.perf_counter()
            folder, built = collection_index(coll, _model_arg(model), encoder.name,
                                             encoder_key(encoder), passage_words, device,
                                             rebuild, reporter)
            manifest = Manifest.read(folder)
            run.builds[f"{coll.name}|{encoder.name}"] = {
                "built": built, "seconds": round(time.perf_counter() - start, 2),
                "passages": manifest.count, "embed_seconds": manifest.stages["embed"]}
            with Index.open(folder, model=encoder, device=device) as index:
                index.warm_up(wait=True)
                for s in chosen:
                    with reporter.stage(f"{coll.name} · {s.label}", len(coll.queries),
                                        keep=False) as advance:
                        run.results[coll.name][s.label] = run_queries(index, coll, s.mode,
                                                                      advance)
    return run


def draw_chart(run: RetrievalRun, path: Path) -> None:
    """Each collection's first metric (nDCG@10 for BEIR, MRR@10 for answers) per system, one
    group of bars per collection (matplotlib, the [plot] extra)."""
    from matplotlib.figure import Figure

    labels = list(dict.fromkeys(label for cells in run.results.values() for label in cells))
    fig = Figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(len(labels), 1)
    for n, label in enumerate(labels):
        values = [run.results[c.name].get(label, {}).get(c.metrics[0], 0.0)
                  for c in run.collections]
        xs = [i + (n - (len(labels) - 1) / 2) * width for i in range(len(run.collections))]
        bars = ax.bar(xs, values, width, label=label)
        ax.bar_label(bars, fmt="%.3f", fontsize=7)
    ax.set_xticks(range(len(run.collections)),
                  [f"{c.name} ({c.split}, {c.metrics[0]})" for c in run.collections])
    ax.set_ylabel("nDCG@10 (documents) · MRR@10 (answers)")
    ax.legend(fontsize=7, ncols=2)
    fig.savefig(path, dpi=120)
