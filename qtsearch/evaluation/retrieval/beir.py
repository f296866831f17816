"""A BEIR-format collection: `corpus.jsonl[.gz]` (`_id`, `title`, `text`), `queries.jsonl`
(`_id`, `text`) and `qrels/SPLIT.tsv` (`query-id`, `corpus-id`, `score`, a header line), and the
ranking metrics BEIR reports (nDCG@10 with graded gains, as trec_eval's ndcg_cut; recall@100;
MRR@10)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qtsearch.core.errors import InputError

if TYPE_CHECKING:
    from qtsearch.lifecycle import Hit

#: Splits tried, in order, when none is named: the development splits come first, so that a
#: default run never scores (and nobody tunes on) a collection's test queries by accident.
SPLIT_ORDER = ("dev", "train", "test")
METRICS = ("nDCG@10", "R@100", "MRR@10")
#: Documents ranked per query (recall@100 needs 100).
DEPTH = 100
#: Published nDCG@10 on the BEIR *test* splits (BEIR paper; MTEB), printed for orientation.
PUBLISHED = {"scifact": {"BM25": 0.665, "all-MiniLM-L6-v2": 0.645},
             "nfcorpus": {"BM25": 0.325, "all-MiniLM-L6-v2": 0.316}}


@dataclass
class Collection:
    """One collection's corpus file, the queries of one split and their judgments."""

    name: str
    corpus: Path
    split: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> {document id: grade > 0}

    by: str = "doc"  # queries find documents, each by its best passage
    metrics: tuple[str, ...] = METRICS
    depth: int = DEPTH
    input_format: str = "records"
    #: The corpus is cut into passages of the run's --passage-words.
    keeps_passage_words: bool = True

    def score(self, qid: str, hits: Sequence[Hit]) -> dict[str, float]:
        """Every metric of METRICS for one query's hits (documents, best first)."""
        return scores([h.doc_id for h in hits if h.doc_id is not None], self.qrels[qid])


def _corpus_file(folder: Path) -> Path:
    for name in ("corpus.jsonl.gz", "corpus.jsonl"):
        if (folder / name).is_file():
            return folder / name
    raise InputError(f"{folder}: not a BEIR folder (no corpus.jsonl or corpus.jsonl.gz)")


def load(folder: str | Path, split: str | None = None) -> Collection:
    """The collection in `folder`, scored on `split` (default: the first of SPLIT_ORDER that
    it has); only queries with a relevant document are kept."""
    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{root}: no such folder")
    corpus = _corpus_file(root)
    splits = [s for s in SPLIT_ORDER if (root / "qrels" / f"{s}.tsv").is_file()]
    if split is None:
        if not splits:
            raise InputError(f"{root}/qrels: no {', '.join(SPLIT_ORDER)} judgments")
        split = splits[0]
    path = root / "qrels" / f"{split}.tsv"
    if not path.is_file():
        raise InputError(f"{path}: no such judgments file (this collection has "
                         f"{', '.join(splits) or 'none'})")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
                continue  # the header line
            if int(row[2]) > 0:
                qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries: dict[str, str] = {}
    with (root / "queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                q = json.loads(line)
                if str(q["_id"]) in qrels:
                    queries[str(q["_id"])] = q["text"]
    if not queries:
        raise InputError(f"{root}: no query of {split} has a judgment")
    return Collection(root.name, corpus, split, queries, qrels)


def ndcg(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with the grade as gain (trec_eval ndcg_cut, as BEIR computes it)."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall(ranked: Sequence[str], relevant: dict[str, int], k: int = 100) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def mrr(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    return next((1.0 / (i + 1) for i, d in enumerate(ranked[:k]) if d in relevant), 0.0)


def scores(ranked: Sequence[str], relevant: dict[str, int]) -> dict[str, float]:
    """Every metric of METRICS for one query."""
    return {"nDCG@10": ndcg(ranked, relevant), "R@100": recall(ranked, relevant),
            "MRR@10": mrr(ranked, relevant)}
