"""Paraphrase retrieval: find a sentence's paraphrase among every sentence of its split.

A pair scored as a paraphrase (STS-B gold ≥ 4 of 5, SICK relatedness ≥ 4.5 of 5, an MSRP
positive) gives two queries, each side finding the other; the pool is every sentence of the
split, so the other pairs' sentences, related or not, are the distractors.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from qtsearch.core.errors import InputError
from qtsearch.evaluation.data_files import read_tsv, sample
from qtsearch.evaluation.relevance.tasks_base import RelevanceTask, register


class ScoredPairs(RelevanceTask):
    """Pairs in a TSV file (sentence A, sentence B, score columns); relevant: score ≥ cut."""

    group = "paraphrase"
    file: ClassVar[str]  # under sts/
    columns: ClassVar[tuple[int, int, int]]  # sentence A, sentence B, score
    header: ClassVar[bool]
    cut: ClassVar[float]

    def load(self, data_dir: Path) -> None:
        path = data_dir / "sts" / self.file
        rows = read_tsv(path, self.columns, self.header)
        rows = [rows[i] for i in sample(len(rows), self.config.limit, self.config.seed)]
        try:
            scored = [(a, b, float(score)) for a, b, score in rows]
        except ValueError as e:
            raise InputError(f"{path}: a score is not a number ({e})") from e
        index = self.set_pool(t for a, b, _ in scored for t in (a, b))
        self.pair_queries(((a, b) for a, b, s in scored if s >= self.cut), index)


@register
class STSBTrain(ScoredPairs):
    name = "STSB-train"
    description = "STS Benchmark train pairs with gold ≥ 4; pool: all train sentences"
    file = "stsbenchmark/sts-train.csv"
    columns = (5, 6, 4)
    header = False
    cut = 4.0


@register
class STSBDev(STSBTrain):
    name = "STSB-dev"
    description = "STS Benchmark dev pairs with gold ≥ 4; pool: all dev sentences"
    file = "stsbenchmark/sts-dev.csv"


@register
class MSRP(ScoredPairs):
    name = "MSRP"
    description = "MSRP test paraphrases (label 1); pool: all test sentences"
    file = "msrp/msr-para-test.tsv"
    columns = (3, 4, 0)
    header = True
    cut = 1.0


@register
class SICK(ScoredPairs):
    name = "SICK"
    description = "SICK test pairs with relatedness ≥ 4.5; pool: all test sentences"
    file = "sick2014/SICK_test_annotated.txt"
    columns = (1, 2, 3)
    header = True
    cut = 4.5
