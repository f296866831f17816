"""BM25 engines side by side on the same terms: quality on SciFact, cost at N Wikipedia rows.

Every engine gets the same terms (qtsearch.index.bm25.Analyzer: words, English stop-words out,
Snowball stems), as whitespace-separated text where it tokenises itself, and BM25 with
k1 = 1.2, b = 0.75 over the OR of the query's terms, exact top k:
  qtsearch  qtsearch.index.bm25 (numpy inverted file, memory-mapped)
  bm25s     bm25s (scipy sparse matrix of precomputed scores), method "lucene", mmap load
  tantivy   tantivy (Rust; BM25 over 1-byte quantised field lengths)
  fts5      SQLite FTS5, ORDER BY bm25() over the OR of the terms (every match scored)
  fts5-budget  the lexical leg over FTS5 alone (Porter-stemmed words, a 600-row budget; the
            path of indexes without BM25 files), on the raw text
  reference BM25 in plain Python dictionaries (SciFact only: far too slow at 1M rows)
SciFact: title + abstract a document, the 809 train claims, nDCG@10. Wikipedia: the first N
sentences of ../shared/data/wikipedia (qtsearch's sentence splitter), queries are 200 held-out
sentences after them and 14 everyday questions, top 50 (hybrid search's fetch); build time,
disk, query p50/p95 wall time and p50 CPU time of the calling thread (steadier than wall time
on a shared machine). One thread each.

    pip install bm25s tantivy   # the engines compared (not qtsearch dependencies)
    nice -n 5 python benchmarks/lexical_engines.py --sentences 1000000 --work /tmp/qt-engines
    python benchmarks/lexical_engines.py --examples indexes/wikipedia   # first hits, before/after
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import itertools
import json
import math
import os
import shutil
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np

from qtsearch.index import bm25 as qbm25

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
K1, B = qbm25.K1, qbm25.B
QUESTIONS = [
    "What is the capital of Australia?", "A war broke out between the two countries.",
    "who invented the telephone?", "How do vaccines work?",
    "He won the Nobel Prize in Physics.", "When did the Roman Empire fall?",
    "What do plants need to grow?", "the largest ocean on Earth",
    "How does a steam engine work?", "Who wrote Hamlet?", "Why is the sky blue?",
    "the first man on the moon", "What causes earthquakes?", "famous painters of the Renaissance",
]
Search = Callable[[list[str], str, int], list[int]]  # (query terms, query text, k) -> rows


def ndcg10(ranked: list[str], relevant: dict[str, int]) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def scifact() -> tuple[list[str], list[str], list[tuple[list[str], dict[str, int]]]]:
    """Document ids, documents and (query terms, judgments) of SciFact's train queries."""
    folder = DATA / "beir" / "scifact"
    ids, texts = [], []
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(d["_id"])
            texts.append(f"{d['title']} {d['text']}")
    judged: dict[str, dict[str, int]] = {}
    for line in (folder / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, score = line.split("\t")
        judged.setdefault(q, {})[d] = int(score)
    queries = {}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        queries[d["_id"]] = d["text"]
    return ids, texts, [(queries[q], rel) for q, rel in judged.items()]


# -- the engines: build(term lists, folder) -> search(query terms, k) -> row numbers ----------

def build_qtsearch(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    qbm25.build(folder, enumerate(texts))  # tokenises itself: its build time includes that
    index = qbm25.Bm25Index.open(folder)
    assert index is not None
    return lambda terms, text, k: [i for i, _ in index.top(list(dict.fromkeys(terms)), k)]


def build_bm25s(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    import bm25s

    model = bm25s.BM25(k1=K1, b=B, method="lucene")
    model.index(docs, show_progress=False)
    model.save(folder / "bm25s")
    del model
    model = bm25s.BM25.load(folder / "bm25s", mmap=True, show_progress=False)
    vocab = model.vocab_dict

    def search(terms: list[str], text: str, k: int) -> list[int]:
        known = [t for t in dict.fromkeys(terms) if t in vocab]
        if not known:
            return []
        scores = model.get_scores(known)
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        top = top[scores[top] > 0]
        return top[np.lexsort((top, -scores[top]))].tolist()

    return search


def build_tantivy(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    import tantivy

    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
    schema_builder.add_integer_field("row", stored=True, fast=True)
    schema = schema_builder.build()
    (folder / "tantivy").mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(schema, path=str(folder / "tantivy"))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for i, terms in enumerate(docs):
        writer.add_document(tantivy.Document(body=" ".join(terms), row=i))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(terms: list[str], text: str, k: int) -> list[int]:
        known = list(dict.fromkeys(terms))
        if not known:
            return []
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in known])
        hits = searcher.search(query, k).hits
        return [searcher.doc(a)["row"][0] for _, a in hits]

    return search


def build_fts5(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    db = sqlite3.connect(folder / "fts5.sqlite", check_same_thread=False)
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61')")
    db.executemany("INSERT INTO t(rowid, body) VALUES (?, ?)",
                   ((i, " ".join(terms)) for i, terms in enumerate(docs)))
    db.commit()

    def search(terms: list[str], text: str, k: int) -> list[int]:
        known = list(dict.fromkeys(terms))
        if not known:
            return []
        match = " OR ".join('"' + t + '"' for t in known)
        rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid LIMIT ?",
                          (match, k)).fetchall()
        return [r[0] for r in rows]

    return search


def build_reference(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    """BM25 by its definition, in dictionaries: the ranking the others should reproduce."""
    tfs = [Counter(d) for d in docs]
    n = len(docs)
    avglen = sum(len(d) for d in docs) / n
    df = Counter(t for tf in tfs for t in tf)

    def search(terms: list[str], text: str, k: int) -> list[int]:
        q = list(dict.fromkeys(terms))
        idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q if t in df}
        scores = {}
        for i, tf in enumerate(tfs):
            s = sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + K1 * (1 - B + B * len(docs[i]) / avglen))
                    for t in idf if t in tf)
            if s > 0:
                scores[i] = s
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]

    return search


def build_fts5_budget(docs: list[list[str]], texts: list[str], folder: Path) -> Search:
    """The lexical leg before the BM25 files: FTS5 (Porter) with its 600-row budget."""
    from qtsearch.index.store import MetadataStore
    from qtsearch.search.lexical import LexicalSearch

    with MetadataStore.create(folder / "meta.sqlite") as store:
        store.insert_many((i, t, "bench", i, 0, i) for i, t in enumerate(texts))
        store.fts_create()
        store.fts_fill(0)
        store.checkpoint()
    lexical = LexicalSearch(MetadataStore.open(folder / "meta.sqlite"))
    lexical.bm25 = None  # the FTS5 path, even if a BM25 folder were beside it
    return lambda terms, text, k: [i for i, _ in lexical.search(text, k)]


ENGINES = {"qtsearch": build_qtsearch, "bm25s": build_bm25s, "tantivy": build_tantivy,
           "fts5": build_fts5, "fts5-budget": build_fts5_budget, "reference": build_reference}


def disk(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def quality(engines: list[str], work: Path) -> dict[str, float]:
    ids, texts, judged = scifact()
    analyzer = qbm25.Analyzer()
    docs = [analyzer.terms(t) for t in texts]
    out = {}
    for name in engines:
        folder = work / f"scifact-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        search = ENGINES[name](docs, texts, folder)
        scores = [ndcg10([ids[i] for i in search(analyzer.terms(q), q, 10)], rel)
                  for q, rel in judged]
        out[name] = round(float(np.mean(scores)), 4)
    return out


def wikipedia(n: int, n_queries: int) -> tuple[list[str], list[str]]:
    from qtsearch.text.reader import read_sentences

    stream = (" ".join(s.text.split()) for s in read_sentences([DATA / "wikipedia"], split=True))
    texts = list(itertools.islice(stream, n))
    held = [s for s in itertools.islice(stream, 50_000) if len(s.split()) >= 6]
    step = max(1, len(held) // n_queries)
    return texts, held[::step][:n_queries] + QUESTIONS


def cost(engines: list[str], n: int, n_queries: int, k: int, work: Path) -> dict[str, dict]:
    t = time.perf_counter()
    texts, queries = wikipedia(n, n_queries)
    print(f"read {len(texts):,} sentences in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    analyzer = qbm25.Analyzer()
    t, c = time.perf_counter(), time.process_time()
    docs = [analyzer.terms(x) for x in texts]
    tokenise_s, tokenise_cpu = time.perf_counter() - t, time.process_time() - c
    q_terms = [analyzer.terms(q) for q in queries]
    out: dict[str, dict] = {}
    for name in engines:
        if name == "reference":
            continue
        folder = work / f"wiki-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        t, c = time.perf_counter(), time.process_time()
        search = ENGINES[name](docs, texts, folder)
        build_s, build_cpu = time.perf_counter() - t, time.process_time() - c
        if name != "qtsearch":  # it tokenises itself; the others were given the terms
            build_s, build_cpu = build_s + tokenise_s, build_cpu + tokenise_cpu
        for q, text in zip(q_terms[:20], queries, strict=False):  # page the files in
            search(q, text, k)
        wall, cpu, empty = [], [], 0
        for q, text in zip(q_terms, queries, strict=True):
            t, c = time.perf_counter(), time.thread_time()
            hits = search(q, text, k)
            wall.append(time.perf_counter() - t)
            cpu.append(time.thread_time() - c)
            empty += not hits
        out[name] = {"build_s": round(build_s, 1), "build_cpu_s": round(build_cpu, 1),
                     "disk_mb": round(disk(folder) / 2**20, 1),
                     "p50_ms": round(float(np.percentile(wall, 50)) * 1000, 2),
                     "p95_ms": round(float(np.percentile(wall, 95)) * 1000, 2),
                     "cpu_p50_ms": round(float(np.percentile(cpu, 50)) * 1000, 2),
                     "empty": empty}
        print(name, out[name], file=sys.stderr)
        del search
    return out


def examples(folder: Path, k: int = 3) -> None:
    """The everyday questions over an index folder, lexical mode, through the FTS5 leg with its
    budget (before the BM25 files) and through the BM25 files: the first hit of each."""
    from qtsearch.index.store import MetadataStore
    from qtsearch.search.lexical import LexicalSearch

    store = MetadataStore.open(folder / "meta.sqlite")
    after = LexicalSearch(store)
    before = LexicalSearch(MetadataStore.open(folder / "meta.sqlite"))
    before.bm25 = None
    print(f"{store.count():,} rows\n")
    print("| query | before: FTS5 with budget | after: BM25 files |\n|---|---|---|")
    for q in QUESTIONS:
        cells = []
        for leg in (before, after):
            hits = leg.search(q, k)
            text = store.get([hits[0][0]])[hits[0][0]]["text"] if hits else "*(nothing)*"
            cells.append((text[:72].rstrip() + "…" if len(text) > 75 else text).replace("|", "/"))
        print(f"| {q} | {cells[0]} | {cells[1]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=50)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--work", type=Path, default=Path("/tmp/qt-engines"))
    parser.add_argument("--skip-cost", action="store_true", help="SciFact quality only")
    parser.add_argument("--examples", type=Path, metavar="INDEX",
                        help="only print the everyday questions' first hits on this index "
                        "folder, before and after the BM25 files")
    args = parser.parse_args()
    if args.examples:
        examples(args.examples)
        return
    engines = args.engines.split(",")
    missing = [e for e in ("bm25s", "tantivy") if e in engines and not importlib.util.find_spec(e)]
    if missing:  # benchmark-only packages, not qtsearch dependencies
        print(f"skipping {', '.join(missing)}: pip install {' '.join(missing)}", file=sys.stderr)
        engines = [e for e in engines if e not in missing]
    args.work.mkdir(parents=True, exist_ok=True)
    q = quality(engines, args.work)
    print("scifact", q, file=sys.stderr)
    c = {} if args.skip_cost else cost(engines, args.sentences, args.queries, args.k, args.work)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"| engine | SciFact train nDCG@10 | build s, wall / CPU ({args.sentences:,} rows) "
          "| disk MB | query p50 ms | p95 ms | CPU p50 ms | empty results |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in engines:
        row = c.get(name, {})
        build = f"{row['build_s']} / {row['build_cpu_s']}" if row else "-"
        print(f"| {name} | {q[name]:.4f} | {build} | {row.get('disk_mb', '-')}"
              f" | {row.get('p50_ms', '-')} | {row.get('p95_ms', '-')}"
              f" | {row.get('cpu_p50_ms', '-')} | {row.get('empty', '-')} |")
    print(f"\nBuild times include tokenising ({args.sentences:,} rows); queries: {args.queries} "
          f"held-out sentences and {len(QUESTIONS)} questions, top {args.k}; "
          f"load average at the end: {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
