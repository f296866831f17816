"""Topical retrieval on TREC: questions of the same fine type (LOC:city, HUM:ind, NUM:date…)
should come first. Pool: the train and test questions; queries: the test questions; relevant:
every other pool question with the query's fine label. Headline: precision of the top 10."""

from __future__ import annotations

from pathlib import Path

from qtsearch.core.errors import InputError
from qtsearch.evaluation.data_files import read_lines, sample
from qtsearch.evaluation.relevance.tasks_base import Query, RelevanceTask, register


def read_fine(path: Path, limit: int | None, seed: int) -> list[tuple[str, str]]:
    """(fine label, question) from a raw TREC file of `COARSE:fine question` lines."""
    rows = []
    for n, line in enumerate(read_lines(path), start=1):
        label, _, text = line.partition(" ")
        if ":" not in label or not text.strip():
            raise InputError(f"{path}: line {n} is not `COARSE:fine question`")
        rows.append((label, text.strip()))
    return [rows[i] for i in sample(len(rows), limit, seed)]


@register
class TREC(RelevanceTask):
    name = "TREC"
    group = "topical"
    description = "TREC test questions find questions of the same fine type (50 types)"
    headline = ("P@10", "R@1", "MRR@10")

    def load(self, data_dir: Path) -> None:
        folder = data_dir / "transfer" / "raw"
        train, test = (read_fine(folder / f, self.config.limit, self.config.seed)
                       for f in ("TREC.train", "TREC.test"))
        label: dict[str, str] = {}
        for fine, text in train + test:  # a question asked twice keeps its first label
            label.setdefault(text, fine)
        rows = self.set_pool(label)
        by_label: dict[str, set[int]] = {}
        for text, fine in label.items():
            by_label.setdefault(fine, set()).add(rows[text])
        queries = dict.fromkeys(rows[text] for _, text in test)
        self.queries = [Query(r, frozenset(by_label[label[self.pool[r]]] - {r}))
                        for r in queries]
