"""Cost of the lexical leg (BM25 over the FTS5 table) at N sentences, without embedding them.

Writes the first N Gutenberg sentences into a metadata store with its full-text table (the
store and FTS code of `build-index`; no vectors), then runs held-out query sentences through
`qtsearch.search.lexical.LexicalSearch` as hybrid search does (top 50): with its word counts
cold, then cached, then fresh after the warm-up's one-pass count of every word.
Reports wall and CPU time (the calling thread's), p50 / p95: CPU time is what a query costs a
core, and stays meaningful on a machine other jobs are loading.

    python benchmarks/lexical_latency.py --sentences 1000000 --work /tmp/qt-lex
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from query_latency import book_sentences, held_out

from qtsearch.index.store import MetadataStore
from qtsearch.search.lexical import LexicalSearch


def build_store(path: Path, n: int, n_queries: int) -> list[str]:
    """The store of the first `n` sentences (reused when present); held-out queries."""
    queries_path = path.with_suffix(".queries.json")
    if path.is_file() and queries_path.is_file():
        return json.loads(queries_path.read_text(encoding="utf-8"))[:n_queries]
    path.unlink(missing_ok=True)
    stream = book_sentences()
    rows = [(i, " ".join(s.text.split()), "gutenberg", 1, s.doc, i)
            for i, s in enumerate(itertools.islice(stream, n))]
    queries = held_out(stream, n_queries)
    with MetadataStore.create(path) as store:
        store.insert_many(rows)
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    queries_path.write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    return queries


def timed(search: LexicalSearch, queries: list[str], k: int) -> dict[str, float]:
    wall, cpu = [], []
    for q in queries:
        t, c = time.perf_counter(), time.thread_time()
        search.search(q, k)
        wall.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    return {f"{name}_{p}_ms": round(float(np.percentile(xs, int(p[1:]))) * 1000, 3)
            for name, xs in (("wall", wall), ("cpu", cpu)) for p in ("p50", "p95")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("-k", type=int, default=50)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / f"meta_{args.sentences}.sqlite"
    queries = build_store(path, args.sentences, args.queries)
    with MetadataStore.open(path) as store:
        search = LexicalSearch(store)
        report = {"sentences": args.sentences, "queries": len(queries), "k": args.k,
                  "row_budget": search.budget, "cold_counts": timed(search, queries, args.k),
                  "cached_counts": timed(search, queries, args.k)}
        warmed = LexicalSearch(store)
        t = time.process_time()
        warmed.learn_counts()  # what Index.warm_up does in its background thread
        report["learn_counts_cpu_s"] = round(time.process_time() - t, 2)
        report["after_warm_up"] = timed(warmed, queries, args.k)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
