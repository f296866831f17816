"""Single-sentence classification: MR, CR, SUBJ, MPQA (10-fold cross-validation) and TREC,
SST-2 (their given splits). Files in transfer/ hold `label sentence` per line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.evaluation import classifier
from qtsearch.evaluation.data_files import read_lines, sample
from qtsearch.evaluation.harness import EmbeddingCache, Task, register


@dataclass
class Labeled:
    texts: list[str]
    labels: np.ndarray


def read_labeled(path: Path, limit: int | None, seed: int) -> Labeled:
    """`label sentence` lines (integer labels), a random `limit` of them if given.

    A label with no sentence (4 lines of CR, 3 of MPQA) is skipped: there is nothing to encode.
    """
    texts, labels = [], []
    for n, line in enumerate(read_lines(path), start=1):
        label, _, text = line.partition(" ")
        if not label.isdigit():
            raise InputError(f"{path}: line {n} is not `label sentence`")
        if not text.strip():
            continue
        labels.append(int(label))
        texts.append(text.strip())
    keep = sample(len(texts), limit, seed)
    return Labeled([texts[i] for i in keep], np.asarray(labels, dtype=np.int64)[keep])


class CrossValidated(Task):
    """One file, no split: accuracy of stratified k-fold cross-validation."""

    group = "classification"
    headline = ("acc",)
    file: ClassVar[str]

    def load(self, data_dir: Path) -> None:
        self.data = read_labeled(data_dir / "transfer" / self.file, self.config.limit,
                                 self.config.seed)

    def sentences(self) -> list[str]:
        return self.data.texts

    def steps(self) -> int:
        return 2  # choose C in every fold, refit every fold

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        acc, std = classifier.kfold_accuracy(embed(self.data.texts), self.data.labels,
                                             self.config.folds, self.config.seed, tick,
                                             self.config.solver)
        return {"acc": acc, "acc_std": std, "n": float(len(self.data.texts))}


@register
class MR(CrossValidated):
    name = "MR"
    description = "movie review polarity (Pang & Lee 2005)"
    file = "rt-polarity.all"


@register
class CR(CrossValidated):
    name = "CR"
    description = "product review polarity (Hu & Liu 2004)"
    file = "custrev.all"


@register
class SUBJ(CrossValidated):
    name = "SUBJ"
    description = "subjective vs objective sentences (Pang & Lee 2004)"
    file = "subj.all"


@register
class MPQA(CrossValidated):
    name = "MPQA"
    description = "opinion polarity of phrases (Wiebe et al. 2005)"
    file = "mpqa.all"


class GivenSplits(Task):
    """Train/(dev)/test files: C chosen on dev (or a held-out part of train), test accuracy."""

    group = "classification"
    headline = ("acc",)
    files: ClassVar[tuple[str, str | None, str]]  # train, dev (None: none), test

    def load(self, data_dir: Path) -> None:
        limit, seed = self.config.limit, self.config.seed
        train, dev, test = self.files
        self.train = read_labeled(data_dir / "transfer" / train, limit, seed)
        self.dev = read_labeled(data_dir / "transfer" / dev, limit, seed) if dev else None
        self.test = read_labeled(data_dir / "transfer" / test, limit, seed)

    def sentences(self) -> list[str]:
        dev = self.dev.texts if self.dev else []
        return self.train.texts + dev + self.test.texts

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        X, y = embed(self.train.texts), self.train.labels
        out = {}
        if self.dev is None:
            probe = classifier.holdout_classify(X, y, self.config.seed,
                                                solver=self.config.solver)
        else:
            dev = (embed(self.dev.texts), self.dev.labels)
            probe = classifier.split_classify((X, y), dev, self.config.solver)
            out["dev_acc"] = classifier.accuracy(probe, *dev)
        out["acc"] = classifier.accuracy(probe, embed(self.test.texts), self.test.labels)
        out["n"] = float(len(self.test.texts))
        if tick:
            tick()
        return out


@register
class TREC(GivenSplits):
    name = "TREC"
    description = "question type, 6 classes (Li & Roth 2002)"
    files = ("TREC.train.all", None, "TREC.test.all")


@register
class SST2(GivenSplits):
    name = "SST2"
    description = "binary sentiment, sentence level (Socher et al. 2013)"
    files = ("stsa.binary.train", "stsa.binary.dev", "stsa.binary.test")
