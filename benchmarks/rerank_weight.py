"""How much should a re-ranked hit's score take from the re-ranker? Answers and paraphrases
at once, the float and int8 MiniLM side by side.

The first stage is the default hybrid search (`depth` hits a query) on two kinds of index,
each built with `build-index`'s code path (cached, shared with `qtsearch bench retrieval` and
`bench relevance`) and searched through `Index.search`:
- answer sentences: SQuAD's development articles (a question finds the sentence holding its
  answer; MRR@10), `--squad-questions` of them drawn at random;
- paraphrases: the relevance benchmark's paraphrase tasks (STSB-train, STSB-dev, MSRP, SICK;
  MRR@10, their mean), `--per-task` queries of each, evenly spaced.
Each query and its hits are encoded once by all-MiniLM-L6-v2 in ONNX Runtime, float and int8
(the re-ranker's small calls), then ordered by `qtsearch.search.fusion.fused` at each weight:
w = 1 is the cosine alone, w = 0 the first stage.

    python benchmarks/rerank_weight.py --weights 0.4 0.5 0.6 0.7 0.8 1.0
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence

import numpy as np

from qtsearch.core.paths import data_root
from qtsearch.encoders.baselines import MiniLM
from qtsearch.evaluation.relevance.indexes import encoder_key, open_task_index
from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks, query_metrics
from qtsearch.evaluation.retrieval import answer_retrieval
from qtsearch.evaluation.retrieval.retrieval_run import collection_index
from qtsearch.lifecycle import Index
from qtsearch.lifecycle.querying import query_encoder
from qtsearch.search.fusion import fused

PARAPHRASE = ("STSB-train", "STSB-dev", "MSRP", "SICK")
#: A query's first stage, each re-ranker's cosines, and how a ranking of its hits scores.
Case = tuple[np.ndarray, dict[str, np.ndarray], Callable[[Sequence[int]], float]]


def encoded(runtimes: dict[str, MiniLM], query: str, texts: list[str]) -> dict[str, np.ndarray]:
    """Each re-ranker's cosine of the query with each text (one call, as the re-ranker's)."""
    out = {}
    for name, encoder in runtimes.items():
        v = encoder.encode([query, *texts], normalize=True)
        out[name] = v[1:] @ v[0]
    return out


def scores(cases: list[Case], weights: list[float], runtime: str) -> list[float]:
    """[the first stage, each weight's fused ranking] mean metric over the cases."""
    cells = [float(np.mean([judge(range(len(first))) for first, _, judge in cases]))]
    for w in weights:
        cells.append(float(np.mean([
            judge(np.argsort(-fused(first, cos[runtime], w), kind="stable").tolist())
            for first, cos, judge in cases])))
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", nargs="+", type=float, default=[0.4, 0.5, 0.6, 0.7, 0.8, 1.0])
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--squad-questions", type=int, default=600)
    parser.add_argument("--per-task", type=int, default=600)
    args = parser.parse_args()
    root = data_root()
    encoder = query_encoder(None, device="cpu")
    runtimes = {"float": MiniLM("cpu", runtime="onnx"),
                "int8": MiniLM("cpu", runtime="onnx", int8=True)}
    beds: dict[str, list[Case]] = {}

    coll = answer_retrieval.load(root / "squad" / "train-v1.1.json.gz", "dev")
    drawn = random.Random(0).sample(sorted(coll.questions), min(args.squad_questions,
                                                                len(coll.questions)))
    folder, _ = collection_index(coll, None, encoder.name, encoder_key(encoder))
    with Index.open(folder, model=encoder, device="cpu") as index:
        cases: list[Case] = []
        for qid in drawn:
            question = coll.questions[qid].question
            hits = index.search(question, args.depth, "hybrid", by=coll.by)

            def judge(order: Sequence[int], qid: str = qid, hits: list = hits) -> float:
                return coll.score(qid, [hits[j] for j in order])["MRR@10"]

            cases.append((np.array([h.score for h in hits]),
                          encoded(runtimes, question, [h.text for h in hits]), judge))
        beds[f"SQuAD dev ({len(drawn)} q)"] = cases

    for task in load_tasks(RelevanceConfig(tasks=list(PARAPHRASE)), root):
        step = max(1, len(task.queries) // args.per_task)
        index, _ = open_task_index(task, encoder, None, device="cpu")
        cases = []
        with index:
            for q in task.queries[::step][: args.per_task]:
                text = task.pool[q.row]
                hits = [h for h in index.search(text, args.depth + 1, "hybrid")
                        if h.id != q.row][: args.depth]

                def judge(order: Sequence[int], q=q, hits: list = hits) -> float:
                    return query_metrics([hits[j].id for j in order], q.relevant)["MRR@10"]

                cases.append((np.array([h.score for h in hits]),
                              encoded(runtimes, text, [h.text for h in hits]), judge))
        beds[f"{task.name} ({len(cases)} q)"] = cases

    heads = ["first stage", *(f"w={w}" for w in args.weights)]
    for runtime in runtimes:
        print(f"\nMRR@10, re-ranked by MiniLM ({runtime}) at depth {args.depth}")
        print("| test bed | " + " | ".join(heads) + " |\n|---|" + "---:|" * len(heads))
        table = {name: scores(cases, args.weights, runtime) for name, cases in beds.items()}
        for name, cells in table.items():
            print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
        para = [cells for name, cells in table.items() if not name.startswith("SQuAD")]
        print("| paraphrase mean | " + " | ".join(
            f"{np.mean(col):.3f}" for col in zip(*para, strict=True)) + " |", flush=True)


if __name__ == "__main__":
    main()
