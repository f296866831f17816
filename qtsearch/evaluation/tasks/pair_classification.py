"""Sentence-pair classification: MSRP paraphrase detection and SICK entailment (SICK-E).

A pair (u, v) becomes the features [u, v, |u−v|, u*v] (Mou et al. 2016, as in SentEval and
InferSent); the probe's C is chosen on the given dev split."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.evaluation import classifier
from qtsearch.evaluation.data_files import read_tsv, sample
from qtsearch.evaluation.harness import EmbeddingCache, Task, register


@dataclass
class Pairs:
    a: list[str]
    b: list[str]
    y: np.ndarray  # class ids or scores


def read_pairs(path: Path, columns: tuple[int, int, int], header: bool, limit: int | None,
               seed: int, label: Callable[[str], float]) -> Pairs:
    """(sentence A, sentence B, label) from the given TSV columns; `label` parses the label."""
    rows = read_tsv(path, columns, header)
    keep = sample(len(rows), limit, seed)
    try:
        y = np.asarray([label(rows[i][2]) for i in keep])
    except (KeyError, ValueError) as e:
        raise InputError(f"{path}: unexpected label {e}") from e
    return Pairs([rows[i][0] for i in keep], [rows[i][1] for i in keep], y)


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


class PairTask(Task):
    """Train, dev and test files of labelled pairs; accuracy (and F1 where binary)."""

    group = "pairs"
    columns: ClassVar[tuple[int, int, int]]  # sentence A, sentence B, label
    files: ClassVar[tuple[str, str, str]]  # train, dev, test under sts/
    header: ClassVar[bool] = True

    @staticmethod
    def label(raw: str) -> int:
        return int(raw)

    def load(self, data_dir: Path) -> None:
        self.splits = [read_pairs(data_dir / "sts" / f, self.columns, self.header,
                                  self.config.limit, self.config.seed, self.label)
                       for f in self.files]

    def sentences(self) -> list[str]:
        return texts_of(self.splits)

    def features(self, embed: EmbeddingCache, p: Pairs) -> np.ndarray:
        return pair_features(embed(p.a), embed(p.b))

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        train, dev, test = ((self.features(embed, p), p.y) for p in self.splits)
        probe = classifier.split_classify(train, dev, self.config.solver)
        X, y = test
        pred = probe.predict(X)
        out = {"acc": float(np.mean(pred == y) * 100), "dev_acc": classifier.accuracy(probe, *dev)}
        if len(np.unique(self.splits[0].y)) == 2:
            tp = float(np.sum((pred == 1) & (y == 1)))
            out["f1"] = 200 * tp / max(1.0, float(np.sum(pred == 1) + np.sum(y == 1)))
        out["n"] = float(len(y))
        if tick:
            tick()
        return out


@register
class MSRP(PairTask):
    name = "MSRP"
    description = "paraphrase detection (Dolan et al. 2004); dev: last 500 training pairs"
    headline = ("acc", "f1")
    columns = (3, 4, 0)
    files = ("msrp/msr-para-train.tsv", "msrp/msr-para-val.tsv", "msrp/msr-para-test.tsv")


SICK_LABELS = {"NEUTRAL": 0, "ENTAILMENT": 1, "CONTRADICTION": 2}
SICK_FILES = ("sick2014/SICK_train.txt", "sick2014/SICK_trial.txt",
              "sick2014/SICK_test_annotated.txt")


@register
class SICKE(PairTask):
    name = "SICK-E"
    description = "entailment, 3 classes (Marelli et al. 2014); dev: SICK trial"
    headline = ("acc",)
    columns = (1, 2, 4)
    files = SICK_FILES

    @staticmethod
    def label(raw: str) -> int:
        return SICK_LABELS[raw]


def cosine(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity (0 where a vector is zero)."""
    nu, nv = np.linalg.norm(u, axis=1), np.linalg.norm(v, axis=1)
    return np.sum(u * v, axis=1) / np.maximum(nu * nv, 1e-12)


def texts_of(pairs: Sequence[Pairs]) -> list[str]:
    return [t for p in pairs for t in (*p.a, *p.b)]
