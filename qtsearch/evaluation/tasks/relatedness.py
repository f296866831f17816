"""Supervised semantic relatedness: SICK-R (scores 1–5) and the STS Benchmark dev set (0–5).

The probe is SentEval's score-distribution regression (Tai et al. 2015) done with scikit-learn:
features [|u−v|, u*v], a gold score y becomes a distribution over the integer grades with mass
on floor(y) and floor(y)+1 (mean y), multinomial logistic regression fits it by weighted
cross-entropy (= KL to the target distribution), and the prediction is the expected grade.
C is chosen by Pearson r on the dev split (SICK trial) or, for STS-B, whose test labels are not
public, on a held-out tenth of its training pairs; the dev set is then the test.
Also reported: `cos_pearson`/`cos_spearman`, the plain cosine of u and v without any training.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np
from scipy.stats import pearsonr, spearmanr

from qtsearch.evaluation import classifier
from qtsearch.evaluation.harness import EmbeddingCache, Task, register
from qtsearch.evaluation.tasks.pair_classification import (
    SICK_FILES,
    Pairs,
    cosine,
    read_pairs,
    texts_of,
)


def correlations(pred: np.ndarray, gold: np.ndarray, prefix: str = "") -> dict[str, float]:
    """Pearson and Spearman correlation; 0 when either side is constant."""
    if np.std(pred) == 0 or np.std(gold) == 0:
        return {f"{prefix}pearson": 0.0, f"{prefix}spearman": 0.0}
    return {f"{prefix}pearson": float(pearsonr(pred, gold).statistic),
            f"{prefix}spearman": float(spearmanr(pred, gold).statistic)}


class Relatedness(Task):
    group = "relatedness"
    headline = ("pearson", "spearman")
    scale: ClassVar[tuple[int, int]]

    splits: list[Pairs]  # train, (dev,) test

    def sentences(self) -> list[str]:
        return texts_of(self.splits)

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        def features(p: Pairs) -> np.ndarray:
            u, v = embed(p.a), embed(p.b)
            return np.concatenate([np.abs(u - v), u * v], axis=1)

        train, test = self.splits[0], self.splits[-1]
        dev = (features(self.splits[1]), self.splits[1].y) if len(self.splits) == 3 else None
        probe = classifier.distribution_regression(features(train), train.y, *self.scale,
                                                   dev=dev, seed=self.config.seed,
                                                   solver=self.config.solver)
        pred = probe.expected(features(test))
        out = correlations(pred, test.y)
        out["mse"] = float(np.mean((pred - test.y) ** 2))
        out.update(correlations(cosine(embed(test.a), embed(test.b)), test.y, "cos_"))
        out["n"] = float(len(test.y))
        if tick:
            tick()
        return out


@register
class SICKR(Relatedness):
    name = "SICK-R"
    description = "relatedness 1–5 (Marelli et al. 2014); dev: SICK trial; test: SICK test"
    scale = (1, 5)

    def load(self, data_dir: Path) -> None:
        self.splits = [read_pairs(data_dir / "sts" / f, (1, 2, 3), True, self.config.limit,
                                  self.config.seed, float) for f in SICK_FILES]


@register
class STSB(Relatedness):
    name = "STSB"
    description = "STS Benchmark 0–5 (Cer et al. 2017); trained on train, scored on dev"
    scale = (0, 5)

    def load(self, data_dir: Path) -> None:
        root = data_dir / "sts" / "stsbenchmark"
        self.splits = [read_pairs(root / f, (5, 6, 4), False, self.config.limit, self.config.seed,
                                  float) for f in ("sts-train.csv", "sts-dev.csv")]

