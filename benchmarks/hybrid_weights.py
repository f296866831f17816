"""Which BM25 weight should hybrid search give a model, and which weight word alignment? Every
test bed at once, each leg beside.

Three kinds of index, each built with `build-index`'s code path (cached, shared with
`qtsearch bench relevance` and `bench retrieval`) and searched through `Index.search`:
- answer sentences: SQuAD's development articles (questions find the sentence holding their
  answer; MRR@10), `--squad-questions` of them drawn at random;
- paraphrases: the relevance benchmark's paraphrase tasks (STSB-train, STSB-dev, MSRP, SICK;
  MRR@10, their mean);
- documents: BEIR development splits (SciFact train, NFCorpus dev; nDCG@10, by document).
For each, the semantic and lexical legs and hybrid at each weight: sentence weights on the
sentence indexes, passage weights on the BEIR ones (whose rows are long enough for the engine
to use its passage weight, `qtsearch.search.fusion.settings_for`). The rule to keep is the one
whose hybrid never falls below its better leg on any test bed.

With `--alignments`, the BM25 weights stay the index's own and word alignment's weight
(`SearchSettings.alignment`, qtsearch.search.alignment) varies instead, in semantic and hybrid
search alike (0: the first stage alone), BM25 beside.

With `--passage-grid`, the documents only: hybrid search over every combination of word
alignment's weight (`--alignments`) and depth (`--passage-depths`), the semantic leg's
feedback (`--passage-feedbacks`), BM25's weight (`--passage-weights`) and the lexical leg's
own feedback (`--passage-lexical-feedbacks`), one row each, semantic search beside at each
alignment weight and depth (the settings it reads).

    python benchmarks/hybrid_weights.py [--model MODEL] --sentence-weights 0.2 0.3 0.4 0.5 \
        --passage-weights 0.6 0.7 [--sentence-feedback 0.5] [--passage-feedback 0]
    python benchmarks/hybrid_weights.py --alignments 0 0.3 0.4 0.5 0.6
    python benchmarks/hybrid_weights.py --passage-grid --alignments 0.3 0.4 0.5 \
        --passage-feedbacks 1 2 3 --passage-weights 0.5 0.6 [--passage-depths 30 100] \
        [--passage-lexical-feedbacks 0.2 0.3]
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from qtsearch.core.paths import data_root
from qtsearch.evaluation.relevance.indexes import encoder_key, open_task_index
from qtsearch.evaluation.relevance.relevance_run import run_queries as run_relevance
from qtsearch.evaluation.relevance.tasks_base import RelevanceConfig, load_tasks
from qtsearch.evaluation.retrieval import answer_retrieval, beir
from qtsearch.evaluation.retrieval.retrieval_run import collection_index
from qtsearch.evaluation.retrieval.retrieval_run import run_queries as run_retrieval
from qtsearch.lifecycle import Index, SearchSettings
from qtsearch.lifecycle.querying import query_encoder

PARAPHRASE = ("STSB-train", "STSB-dev", "MSRP", "SICK")
BEIR = (("scifact", "train"), ("nfcorpus", "dev"))


def sweep(index: Index, weights: list[float],
          score: Callable[[str, SearchSettings | None], float],
          feedback: float | None = None) -> list[float]:
    """[semantic, lexical, hybrid at each weight] of one index; `feedback`: the semantic
    leg's pseudo-relevance feedback in hybrid search (None: the index's own)."""
    cells = [score("semantic", None), score("lexical", None)]
    own = index.settings if feedback is None else replace(index.settings, feedback=feedback)
    for w in weights:
        cells.append(score("hybrid", replace(own, lexical_weight=w)))
    return cells


def align_sweep(index: Index, alignments: list[float],
                score: Callable[[str, SearchSettings | None], float]) -> list[float]:
    """[lexical, semantic at each alignment weight, hybrid at each] of one index."""
    cells = [score("lexical", None)]
    for mode in ("semantic", "hybrid"):
        cells += [score(mode, replace(index.settings, alignment=a)) for a in alignments]
    return cells


def row(name: str, cells: list[float], legs: bool = True) -> str:
    if not legs:
        return f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |"
    best_leg = max(cells[:2])
    shown = [f"{c:.3f}" if i < 2 or c >= best_leg else f"*{c:.3f}*" for i, c in enumerate(cells)]
    return f"| {name} | " + " | ".join(shown) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="Model folder or encoder name "
                                                      "(default: the shipped model).")
    parser.add_argument("--sentence-weights", nargs="+", type=float,
                        default=[0.1, 0.2, 0.3, 0.4, 0.5])
    parser.add_argument("--passage-weights", nargs="+", type=float, default=[0.5, 0.6, 0.7, 0.8])
    parser.add_argument("--passage-feedback", type=float, default=None,
                        help="The semantic leg's feedback over passages (default: the "
                             "index's own, qtsearch.search.fusion.FEEDBACK).")
    parser.add_argument("--sentence-feedback", type=float, default=None,
                        help="The semantic leg's feedback over sentences (default: the "
                             "index's own, none).")
    parser.add_argument("--alignments", nargs="+", type=float, default=None,
                        help="Vary word alignment's weight instead of BM25's.")
    parser.add_argument("--passage-grid", action="store_true",
                        help="Documents only: hybrid over every (alignment, depth, feedback, "
                             "BM25 weight, lexical feedback), semantic beside.")
    parser.add_argument("--passage-feedbacks", nargs="+", type=float, default=[2.0])
    parser.add_argument("--passage-lexical-feedbacks", nargs="+", type=float, default=None,
                        help="The lexical leg's feedback over passages (default: the "
                             "index's own).")
    parser.add_argument("--passage-depths", nargs="+", type=int, default=None,
                        help="Word alignment's depth over passages (default: the index's "
                             "own).")
    parser.add_argument("--squad-questions", type=int, default=3000)
    parser.add_argument("--skip", nargs="*", default=[], choices=["squad", "paraphrase", "beir"])
    args = parser.parse_args()
    root = data_root()
    encoder = query_encoder(args.model, device="cpu")
    fingerprint = encoder_key(encoder)
    if args.passage_grid:
        grid(args, encoder, fingerprint)
        return
    aligned = args.alignments is not None
    Score = Callable[[str, SearchSettings | None], float]

    def measure(index: Index, weights: list[float], score: Score,
                feedback: float | None) -> list[float]:
        return align_sweep(index, weights, score) if aligned \
            else sweep(index, weights, score, feedback)

    def heads(kind: str, weights: list[float]) -> str:
        cols = ["lexical", *(f"semantic a={a}" for a in weights),
                *(f"hybrid a={a}" for a in weights)] if aligned \
            else ["semantic", "lexical", *(f"w={w}" for w in weights)]
        return f"| {kind} | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols)

    weights = args.alignments if aligned else args.sentence_weights
    print(f"model: {args.model or 'default'}; *x*: hybrid below its better leg; feedback "
          f"over sentences {args.sentence_feedback}, passages {args.passage_feedback} (None: "
          "the index's own)")
    print(heads("sentences", weights))
    if "squad" not in args.skip:
        coll = answer_retrieval.load(root / "squad" / "train-v1.1.json.gz", "dev")
        drawn = random.Random(0).sample(sorted(coll.questions), min(args.squad_questions,
                                                                    len(coll.questions)))
        coll.questions = {q: coll.questions[q] for q in drawn}
        folder, _ = collection_index(coll, args.model, encoder.name, fingerprint)
        with Index.open(folder, model=encoder, device="cpu") as index:
            print(row(f"SQuAD dev ({len(drawn)} q, MRR@10)", measure(
                index, weights, lambda m, s: run_retrieval(index, coll, m, settings=s)["MRR@10"],
                args.sentence_feedback), not aligned), flush=True)
    if "paraphrase" not in args.skip:
        config = RelevanceConfig(tasks=list(PARAPHRASE))
        means = [0.0] * (1 + 2 * len(weights) if aligned else 2 + len(weights))
        for task in load_tasks(config, root):
            index, _ = open_task_index(task, encoder, args.model, device="cpu")
            with index:
                cells = measure(index, weights,
                                lambda m, s, i=index, t=task:
                                run_relevance(i, t, m, settings=s)["MRR@10"],
                                args.sentence_feedback)
            means = [a + c / len(PARAPHRASE) for a, c in zip(means, cells, strict=True)]
            print(row(f"{task.name} (MRR@10)", cells, not aligned), flush=True)
        print(row("paraphrase mean", means, not aligned), flush=True)
    if "beir" not in args.skip:
        pw = args.alignments if aligned else args.passage_weights
        fb = "" if args.passage_feedback is None else f" (feedback {args.passage_feedback})"
        print("\n" + heads(f"documents{fb}", pw))
        for name, split, coll, index in beir_indexes(args.model, encoder, fingerprint):
            print(row(f"{name} {split} (nDCG@10)", measure(
                index, pw, lambda m, s, i=index, c=coll:
                run_retrieval(i, c, m, settings=s)["nDCG@10"], args.passage_feedback),
                not aligned), flush=True)


def beir_indexes(model: str | None, encoder: Any, fingerprint: str
                 ) -> Iterator[tuple[str, str, Any, Index]]:
    """(name, split, collection, its index opened) for each BEIR development split."""
    for name, split in BEIR:
        coll = beir.load(data_root() / "beir" / name, split)
        folder, _ = collection_index(coll, model, encoder.name, fingerprint)
        with Index.open(folder, model=encoder, device="cpu") as index:
            yield name, split, coll, index


def grid(args: argparse.Namespace, encoder: Any, fingerprint: str) -> None:
    """nDCG@10 on the BEIR development splits over every passage setting asked: hybrid at each
    combination, semantic at each alignment weight and depth."""
    Combo = tuple[float, int | None, float, float, float | None]
    combos: list[Combo] = list(itertools.product(
        args.alignments or [0.5], args.passage_depths or [None], args.passage_feedbacks,
        args.passage_weights, args.passage_lexical_feedbacks or [None]))
    cells: dict[Combo, list[float]] = {c: [] for c in combos}
    # semantic search reads only the alignment's weight and depth: once per pair
    semantic: dict[tuple[float, int | None], list[float]] = {
        (a, d): [] for a, d, *_ in combos}
    for _, _, coll, index in beir_indexes(args.model, encoder, fingerprint):
        own = index.settings
        for a, d, f, w, lf in combos:
            chosen = replace(own, alignment=a, alignment_depth=d or own.alignment_depth,
                             feedback=f, lexical_weight=w,
                             lexical_feedback=own.lexical_feedback if lf is None else lf)
            cells[(a, d, f, w, lf)].append(run_retrieval(index, coll, "hybrid",
                                                         settings=chosen)["nDCG@10"])
        for a, d in semantic:
            aligned = replace(own, alignment=a, alignment_depth=d or own.alignment_depth)
            semantic[(a, d)].append(run_retrieval(index, coll, "semantic",
                                                  settings=aligned)["nDCG@10"])
    heads = [f"{n} {s} hybrid / semantic" for n, s in BEIR]
    print("| alignment | depth | feedback | BM25 weight | lexical feedback | " + " | ".join(heads)
          + " |\n|---:|---:|---:|---:|---:|" + "---|" * len(BEIR))
    for (a, d, f, w, lf), scores in cells.items():
        pairs = zip(scores, semantic[(a, d)], strict=True)
        print(f"| {a} | {d or 'own'} | {f} | {w} | {'own' if lf is None else lf} | "
              + " | ".join(f"{h:.4f} / {m:.4f}" for h, m in pairs) + " |", flush=True)


if __name__ == "__main__":
    main()
