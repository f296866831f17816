"""nDCG@10 of models on a BEIR collection through build-index + search, as a user runs them
(the measurements behind `qtsearch adapt`'s defaults, docs/adapt.md).

    python benchmarks/adapt_beir.py ../shared/data/beir/scifact --split train \
        -m default -m runs/adapt-scifact [--work runs/beir-indexes]

Every document is indexed as one line "title. text" (a flat index: exact search, so the
figures compare the models and nothing else); every query of the split with judgments is
searched in semantic and hybrid mode (k=10); a query semantic search refuses (none of its
words known to the model) scores 0 there. Prints one row per model, with the index build
time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import time
from pathlib import Path

from qtsearch.core.errors import InputError
from qtsearch.evaluation.retrieval import beir
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.writers import build_folder


def read_corpus(corpus: Path) -> tuple[list[str], list[str]]:
    """(document ids, "title. text" lines) of a corpus.jsonl.gz."""
    ids, lines = [], []
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            text = " ".join(f"{r.get('title') or ''}. {r.get('text') or ''}".split())
            ids.append(r["_id"])
            lines.append(text.lstrip(". ") or "(empty)")
    return ids, lines


def ndcg10(ranked: list[str], judged: dict[str, int]) -> float:
    """nDCG@10 with the exponential gain 2^grade - 1, which docs/adapt.md's figures were
    measured with; BEIR's (beir.ndcg) takes the grade itself: the same on SciFact's 0/1
    judgments, not on NFCorpus's grades 1 and 2."""
    dcg = sum((2 ** judged.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def score(folder: Path, split: str, model: str, work: Path) -> dict[str, float]:
    collection = beir.load(folder, split)
    queries, qrels = collection.queries, collection.qrels
    ids, lines = read_corpus(collection.corpus)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"{folder.name}.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = work / f"{folder.name}-{Path(model).name}"
    t0 = time.perf_counter()
    build_folder(corpus, out, None if model == "default" else model, index="flat",
                 overwrite=True, device="cpu")
    figures = {"build_s": time.perf_counter() - t0}
    qids = sorted(queries)
    with Index.open(out, device="cpu") as index:
        for mode in ("semantic", "hybrid"):
            total = 0.0
            for q in qids:
                try:
                    hits = index.search(queries[q], k=10, mode=mode)
                except InputError:  # semantic search refuses a query of unknown words only
                    continue
                total += ndcg10([ids[h.line - 1] for h in hits], qrels[q])
            figures[mode] = total / len(qids)
    figures["queries"] = len(qids)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--split", default="dev")
    parser.add_argument("-m", "--model", action="append", default=[])
    parser.add_argument("--work", type=Path, default=Path("runs/beir-indexes"))
    args = parser.parse_args()
    for model in args.model or ["default"]:
        f = score(args.folder, args.split, model, args.work)
        print(f"{args.folder.name} {args.split} {model}: semantic nDCG@10 {f['semantic']:.4f} "
              f"hybrid {f['hybrid']:.4f} ({f['queries']} queries; index {f['build_s']:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
