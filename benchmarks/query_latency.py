"""Query latency and recall of every index type on N Gutenberg sentences, or on Wikipedia.

The corpus is embedded once: a flat index (exact search, the reference) is built by the real
builder (`qtsearch.lifecycle.writers.build_folder`, the code path of `Index.build` and of
`qtsearch build-index`) from the first N sentences of the shared Gutenberg books, one per line,
a blank line between books, or taken as it is with `--from-index DIR` (e.g. the 1M flat index
`build_index.py --keep` leaves). The other types (sq8, ivf-pq, hnsw) are derived from its
vectors and metadata with `qtsearch.indexing.derive.build_from_index`, which runs the builder's
own index stage (choice, training sample, add, recall tuning): the same index `build-index
--index TYPE` makes, without embedding the corpus again. Queries are held-out sentences read
after the first N. With `--wikipedia K` the flat index is built from the first K of the 200
WikiExtractor shards of
../shared/data/wikipedia as they are (articles, titles, sections: what `qtsearch build-index`
makes of them) and the queries are sentences of the next shard. Each index is then opened as
`qtsearch.Index` (as a Python caller does; the CLI and the shell search the same way) and
measured:

- single-query latency, p50 and p95: end to end (what `Index.search(q, k)` costs in the
  index's default mode, hybrid where it has its full-text table: encoding + vector search +
  BM25 + SQLite metadata), in each mode (semantic, lexical, hybrid), and faiss search alone;
- batched throughput (queries/s): all queries in one call, end to end and faiss alone;
- recall@k of the faiss results against exact search (the flat index);
- optionally (--sweep) recall and search latency over the tuned parameter (nprobe, efSearch).

Indexes are kept under --work and reused by a rerun with the same N and model.

At 1M sentences, chained with the build benchmark (see benchmarks/build_index.py; with the
shipped 1200-d model on 2 cores expect ~10-12 min here: sq8 ~1-2 min, ivf-pq ~2-3 min and
hnsw ~5 min to derive, ~2 min of measuring):

    python benchmarks/build_index.py --index flat --sentences 10000 100000 1000000 \
        --keep /tmp/qt-bench/flat_1000000 --json /tmp/qt-bench/build.json
    python benchmarks/query_latency.py --from-index /tmp/qt-bench/flat_1000000 \
        --work /tmp/qt-bench --out /tmp/qt-bench/query.json

or on its own (embeds N sentences once, ~3 min per million on 2 cores):

    python benchmarks/query_latency.py --model MODEL --sentences 1000000 --work /tmp/qt-bench

or on Wikipedia (20 shards: ~145k sentences):

    python benchmarks/query_latency.py --wikipedia 20 --work /tmp/qt-bench
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from qtsearch.index.backend import VectorBackend
    from qtsearch.index.recall import Truth

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
INDEX_TYPES = ("flat", "sq8", "ivf", "ivf-pq", "hnsw")
SWEEPS = {"ivf-pq": ("nprobe", [1, 2, 4, 8, 16, 32, 64, 128, 256]),
          "ivf": ("nprobe", [16, 32, 64, 96, 128, 192, 256]),
          "hnsw": ("efSearch", [16, 32, 64, 128, 256, 512, 1024])}
#: One in this many held-out sentences becomes a query (spread over the text, not one scene).
QUERY_STRIDE = 7
MIN_QUERY_WORDS = 4


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def gutenberg_books() -> list[Path]:
    folder = SHARED_DATA / "gutenberg"
    books = sorted(folder.glob("*.txt.gz"))
    if not books:
        sys.exit(f"query_latency: no Gutenberg books under {folder} (the shared data folder "
                 "must sit beside the checkout)")
    return books


def held_out(stream: Iterator, n_queries: int) -> list[str]:
    """Query sentences from what follows the corpus: one in QUERY_STRIDE, ≥ MIN_QUERY_WORDS."""
    texts = (" ".join(s.text.split()) for s in itertools.islice(stream, None, None,
                                                                   QUERY_STRIDE))
    return list(itertools.islice((q for q in texts if len(q.split()) >= MIN_QUERY_WORDS),
                                 n_queries))


def book_sentences() -> Iterator:
    from qtsearch.text.reader import read_sentences

    return read_sentences([str(b) for b in gutenberg_books()], split=True)


def write_corpus(path: Path, n: int, n_queries: int) -> list[str]:
    """The first `n` sentences in lines mode at `path`; returns held-out query sentences."""
    queries_path = path.with_suffix(".queries.json")
    if path.is_file() and queries_path.is_file():
        queries = json.loads(queries_path.read_text(encoding="utf-8"))
        if len(queries) >= n_queries:
            return queries[:n_queries]
    stream = book_sentences()
    written, doc = 0, None
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for s in stream:
            text = " ".join(s.text.split())
            if not text:
                continue
            if doc is not None and s.doc != doc:
                fh.write("\n")
            doc = s.doc
            fh.write(text + "\n")
            written += 1
            if written == n:
                break
    if written < n:
        sys.exit(f"query_latency: the books hold only {written:,} sentences (asked {n:,})")
    queries = held_out(stream, n_queries)
    os.replace(tmp, path)
    queries_path.write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    return queries


def query_file(path: Path) -> list[str]:
    """The queries of a file: a JSON list, or one query a line (blank ones left out)."""
    text = path.read_text(encoding="utf-8")
    queries = json.loads(text) if text.lstrip().startswith("[") else text.splitlines()
    return [q for q in queries if q.strip()]


def queries_after(flat: Path, n_queries: int) -> list[str]:
    """Held-out queries for an existing index of the first N book sentences; checks that its
    last sentence is sentence N of the books (else the queries could be indexed sentences)."""
    from qtsearch import Index

    with Index.open(flat, device="cpu") as index:
        n = len(index)
        last = index.get([n - 1])[0].text
    stream = book_sentences()
    mine = next(itertools.islice(stream, n - 1, None), None)
    if mine is None or " ".join(mine.text.split()) != " ".join(last.split()):
        sys.exit(f"query_latency: {flat} does not hold the first {n:,} sentences of the "
                 "Gutenberg books (build it with benchmarks/build_index.py)")
    return held_out(stream, n_queries)


def build_flat(corpus: list[Path], model: str, out: Path, n: int | None) -> dict[str, Any]:
    """Build (or reuse) the flat reference index of `n` sentences (None: whatever `corpus`
    holds); returns its manifest."""
    from qtsearch.app.progress_bars import RichReporter
    from qtsearch.encoders.registry import load_encoder
    from qtsearch.lifecycle.writers import build_folder

    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        fingerprint = load_encoder(model, device="cpu").fingerprint
        if (manifest["count"] == n or n is None) and (
                manifest["model"]["fingerprint"] == fingerprint):
            log(f"flat: reusing {out}")
            return manifest
    log(f"flat: building {out}")
    result = build_folder(list(corpus), out, model, reporter=RichReporter(), index="flat",
                          overwrite=True)
    return result.manifest


def derive(flat: Path, flat_manifest: dict[str, Any], out: Path, index_type: str
           ) -> dict[str, Any]:
    """Build (or reuse) an `index_type` index from the flat index's vectors."""
    from qtsearch.app.progress_bars import RichReporter
    from qtsearch.indexing.derive import build_from_index

    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if (manifest["count"] == flat_manifest["count"] and manifest["index_type"] == index_type
                and manifest["model"]["fingerprint"] == flat_manifest["model"]["fingerprint"]):
            log(f"{index_type}: reusing {out}")
            return manifest
    log(f"{index_type}: deriving {out} from {flat}")
    result = build_from_index(flat, out, index_type, overwrite=True,
                              reporter=RichReporter())
    return result.manifest


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def _timed(fn: Any, *args: Any) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def _timed_cpu(fn: Any, *args: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the whole process) of one call."""
    t, c = time.perf_counter(), time.process_time()
    fn(*args)
    return time.perf_counter() - t, time.process_time() - c


def measure(folder: Path, queries: list[str], truth: Truth, k: int, single: int,
            sweep: bool) -> dict[str, Any]:
    """Latency, throughput and recall of one index folder, opened as the CLI opens it."""
    from qtsearch import Index
    from qtsearch.index.recall import recall_at_k

    t0 = time.perf_counter()
    idx = Index.open(folder, device="cpu")
    load_s = time.perf_counter() - t0
    with idx:
        info = idx.info()
        idx.warm_up(wait=True)  # page cache filled, as in a shell after its warm-up
        vectors = idx.embed(queries)
        single_q = queries[:single]
        # Each measured on its own pass: interleaved, a step ran right after another's
        # OpenMP threads and shared the 2 cores with their spin-wait.
        # The default mode first: its queries' words are new to the index's caches, as a
        # user's are (a later pass would find them stemmed and counted).
        modes = [m for m in ("hybrid", "semantic", "lexical")  # older indexes: no FTS
                 if m == "semantic" or idx.default_mode == "hybrid"]
        e2e, cpu = {}, {}
        for m in modes:  # wall time, and CPU time of all threads (robust to a loaded machine)
            wall_s, cpu_s = zip(*(_timed_cpu(idx.search, q, k, m) for q in single_q),
                                strict=True)
            e2e[m], cpu[m] = percentiles(list(wall_s)), percentiles(list(cpu_s))
        search_only = [_timed(idx.backend.search, v[None, :], k)
                       for v in vectors[:single]]
        encode = [_timed(idx.embed, [q]) for q in single_q]
        t = time.perf_counter()
        idx.search_many(queries, k)
        batched_e2e = len(queries) / (time.perf_counter() - t)
        t = time.perf_counter()
        _, found = idx.backend.search(vectors, k)
        batched_search = len(queries) / (time.perf_counter() - t)
        row: dict[str, Any] = {
            "index_type": info["index_type"], "index_key": info["index_key"],
            "params": dict(idx.backend.params), "count": len(idx),
            "load_s": round(load_s, 2),
            "bytes": sum(f.stat().st_size for f in folder.iterdir() if f.is_file()),
            "index_build_s": round(info.get("stages", {}).get("index", 0.0), 1),
            "single_queries": len(single_q),
            "default_mode": idx.default_mode, "end_to_end": e2e[idx.default_mode],
            "end_to_end_by_mode": e2e, "cpu_by_mode": cpu,
            "search_only": percentiles(search_only),
            "encode_only": percentiles(encode),
            "batched_qps_end_to_end": round(batched_e2e, 1),
            "batched_qps_search_only": round(batched_search, 1),
            f"recall@{k}": round(recall_at_k(found, truth, getattr(idx.backend, "fold", None)), 4),
        }
        if sweep and info["index_type"] in SWEEPS:
            row["sweep"] = sweep_parameter(idx.backend, info["index_type"], vectors[:single],
                                           truth.head(single), k)
    return row


def sweep_parameter(backend: VectorBackend, index_type: str, vectors: np.ndarray, truth: Truth,
                    k: int) -> list[dict]:
    """Recall and single-query search latency over the index type's search parameter."""
    from qtsearch.index.recall import recall_at_k

    name, values = SWEEPS[index_type]
    tuned = dict(backend.params)
    points = []
    for value in values:
        backend.set_params({name: value})
        times, found = [], []
        for v in vectors:
            t = time.perf_counter()
            _, ids = backend.search(v[None, :], k)
            times.append(time.perf_counter() - t)
            found.append(ids[0])
        points.append({name: value, **percentiles(times),
                       f"recall@{k}": round(recall_at_k(np.asarray(found), truth,
                                                         getattr(backend, "fold", None)), 4)})
    backend.set_params(tuned)
    return points


def markdown(rows: list[dict[str, Any]], k: int) -> str:
    lines = [f"| index | key | params | recall@{k} | end-to-end p50 / p95 ms | "
             "search p50 / p95 ms | encode p50 ms | batched q/s (end-to-end / search) | "
             "size MB | load s | index build s | p50 ms semantic / lexical / hybrid "
             "(CPU ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        params = ", ".join(f"{n}={v:g}" for n, v in r["params"].items()) or "–"
        lines.append(
            f"| {r['index_type']} | `{r['index_key']}` | {params} | {r[f'recall@{k}']:.3f} | "
            f"{r['end_to_end']['p50_ms']:.2f} / {r['end_to_end']['p95_ms']:.2f} | "
            f"{r['search_only']['p50_ms']:.2f} / {r['search_only']['p95_ms']:.2f} | "
            f"{r['encode_only']['p50_ms']:.2f} | "
            f"{r['batched_qps_end_to_end']:,.0f} / {r['batched_qps_search_only']:,.0f} | "
            f"{r['bytes'] / 1e6:,.0f} | {r['load_s']:.2f} | {r['index_build_s']:.1f} | "
            + " / ".join(f"{r['end_to_end_by_mode'][m]['p50_ms']:.2f} "
                         f"({r['cpu_by_mode'][m]['p50_ms']:.2f})"
                         for m in ("semantic", "lexical", "hybrid") if m in r["cpu_by_mode"])
            + " |")
    for r in rows:
        for p in r.get("sweep", []):
            name = next(iter(p))
            lines.append(f"| {r['index_type']} | sweep | {name}={p[name]} | "
                         f"{p[f'recall@{k}']:.3f} | | {p['p50_ms']:.2f} / {p['p95_ms']:.2f} "
                         "| | | | | | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None,
                        help="Model folder (default: the shipped model; with --from-index: the "
                             "index's own model).")
    parser.add_argument("--sentences", type=int, default=1_000_000,
                        help="Corpus size N (with --from-index: the index's size).")
    parser.add_argument("--from-index", type=Path, default=None,
                        help="A flat index of the first N book sentences (build_index.py "
                             "--index flat --keep DIR) to derive the other types from, "
                             "instead of embedding the corpus here.")
    parser.add_argument("--wikipedia", type=int, default=None, metavar="K",
                        help="Index the first K of the 200 Wikipedia shards (WikiExtractor "
                             "output) instead; queries come from shard K+1.")
    parser.add_argument("--work", type=Path, required=True,
                        help="Folder for the corpus and the indexes (kept for reruns).")
    parser.add_argument("--types", default=",".join(INDEX_TYPES),
                        help="Index types to measure (flat is always there: the reference; "
                             "the others are derived from its vectors).")
    parser.add_argument("--queries", type=int, default=500,
                        help="Held-out queries (recall and batched throughput).")
    parser.add_argument("--single", type=int, default=300,
                        help="Queries timed one at a time (p50/p95).")
    parser.add_argument("--flat-single", type=int, default=50,
                        help="Single queries on flat (exhaustive: slow at 1M).")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=None,
                        help="Threads for torch and faiss (default: their own default).")
    parser.add_argument("--sweep", action="store_true",
                        help="Also sweep nprobe / efSearch (recall vs search latency).")
    parser.add_argument("--out", type=Path, help="Write the results as JSON here.")
    args = parser.parse_args()

    types = [t.strip() for t in args.types.split(",") if t.strip()]
    unknown = set(types) - set(INDEX_TYPES)
    if unknown:
        parser.error(f"unknown index types {sorted(unknown)}; choose from {INDEX_TYPES}")
    logging.basicConfig(level=logging.WARNING, format="qtsearch: %(levelname)s: %(message)s")
    import faiss
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)

    args.work.mkdir(parents=True, exist_ok=True)
    if args.from_index:
        from qtsearch.core.errors import QTSearchError
        from qtsearch.lifecycle.on_disk import read_manifest

        flat = args.from_index
        try:
            flat_manifest = read_manifest(flat)
        except QTSearchError as e:
            sys.exit(f"query_latency: {e}")
        if flat_manifest["index_type"] != "flat":
            sys.exit(f"query_latency: {flat} is a {flat_manifest['index_type']} index; "
                     "--from-index needs a flat one (build_index.py --index flat --keep DIR)")
        n = flat_manifest["count"]
        queries = queries_after(flat, args.queries)
        log(f"corpus: the {n:,} sentences of {flat}; {len(queries)} held-out queries")
    elif args.wikipedia:
        from build_index import wikipedia_shards

        from qtsearch.text.reader import read_sentences

        shards = wikipedia_shards(args.wikipedia + 1)  # the last one holds the queries
        queries = held_out(read_sentences([str(shards[-1])]), args.queries)
        flat = args.work / f"flat_wiki{args.wikipedia}"  # named like the derived ones below
        flat_manifest = build_flat(shards[:-1], args.model, flat, None)
        n = flat_manifest["count"]
        log(f"corpus: {n:,} sentences of {args.wikipedia} Wikipedia shards; {len(queries)} "
            f"held-out queries from {shards[-1].name}")
    else:
        n = args.sentences
        corpus = args.work / f"gutenberg_{n}.txt"
        queries = write_corpus(corpus, n, args.queries)
        log(f"corpus: {n:,} sentences in {corpus}; {len(queries)} held-out queries")
        flat = args.work / f"flat_{n}"
        flat_manifest = build_flat([corpus], args.model, flat, n)
    tag = f"wiki{args.wikipedia}" if args.wikipedia and not args.from_index else str(n)
    folders = {t: flat if t == "flat" else args.work / f"{t}_{tag}" for t in types}
    for t in types:
        if t != "flat":
            derive(flat, flat_manifest, folders[t], t)

    from qtsearch import Index
    from qtsearch.index.recall import TIE_EXTRA, Truth

    with Index.open(flat, device="cpu") as exact:
        queries = [q for q in queries if exact.encoder.known_words(q) > 0]
        scores, ids = exact.backend.search(exact.embed(queries), args.k + TIE_EXTRA)
        truth = Truth(ids, scores, args.k)  # tie-aware recall (qtsearch.index.recall)

    rows = []
    for t in types:
        single = args.flat_single if t == "flat" else args.single
        log(f"{t}: measuring ({single} single queries, {len(queries)} batched)")
        rows.append(measure(folders[t], queries, truth, args.k, single, args.sweep))
        log(json.dumps(rows[-1]))

    report = {
        "sentences": n, "queries": len(queries), "k": args.k,
        "model": flat_manifest["model"], "reference": str(flat), "threads": {
            "torch": torch.get_num_threads(), "faiss": faiss.omp_get_max_threads()},
        "machine": {"cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(), "python": platform.python_version(),
                    "faiss": faiss.__version__, "torch": torch.__version__},
        "results": rows,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        log(f"results written to {args.out}")
    print(markdown(rows, args.k))


if __name__ == "__main__":
    main()
