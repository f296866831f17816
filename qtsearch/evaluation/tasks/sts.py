"""SemEval STS 2012–2016: Pearson and Spearman correlation of the cosine similarity of the two
sentence vectors with the gold score, no training.

Each year has several subsets (`sts/semeval-sts/<year>/*.test.tsv`, `score<TAB>s1<TAB>s2`);
pairs without a gold score (2015 and 2016 ship unscored pairs too) are skipped. As in SentEval,
`pearson`/`spearman` are the averages over the year's subsets weighted by their sizes
(`*_mean`: unweighted), and `<subset>.pearson` etc. give each subset. STS 2012 here lacks MSRvid
(licence, see the data README), so its figures are not exactly SentEval's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from qtsearch.core.errors import InputError
from qtsearch.evaluation.data_files import read_lines, sample
from qtsearch.evaluation.harness import EmbeddingCache, Task, register
from qtsearch.evaluation.tasks.pair_classification import Pairs, cosine, texts_of
from qtsearch.evaluation.tasks.relatedness import correlations


def read_scored(path: Path, limit: int | None, seed: int) -> Pairs:
    """The scored pairs of one subset file."""
    a, b, y = [], [], []
    for n, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise InputError(f"{path}: line {n} is not `score<TAB>s1<TAB>s2`")
        if not fields[0].strip():
            continue
        try:
            y.append(float(fields[0]))
        except ValueError as e:
            raise InputError(f"{path}: line {n}: bad score {fields[0]!r}") from e
        a.append(fields[1].strip())
        b.append(fields[2].strip())
    keep = sample(len(y), limit, seed)
    return Pairs([a[i] for i in keep], [b[i] for i in keep], np.asarray(y)[keep])


class STSYear(Task):
    group = "sts"
    headline = ("pearson", "spearman")
    year: int

    def load(self, data_dir: Path) -> None:
        folder = data_dir / "sts" / "semeval-sts" / str(self.year)
        files = sorted(folder.glob("*.test.tsv"))
        if not files:
            raise InputError(f"{folder}: no STS {self.year} test files (*.test.tsv)")
        self.subsets = {f.name.removesuffix(".test.tsv"): read_scored(f, self.config.limit,
                                                                       self.config.seed)
                        for f in files}

    def sentences(self) -> list[str]:
        return texts_of(list(self.subsets.values()))

    def run(self, embed: EmbeddingCache, tick: Callable[[], None] | None = None
            ) -> dict[str, float]:
        out: dict[str, float] = {}
        per = []
        for name, p in self.subsets.items():
            c = correlations(cosine(embed(p.a), embed(p.b)), p.y)
            out.update({f"{name}.{k}": v for k, v in c.items()})
            per.append((c["pearson"], c["spearman"], len(p.y)))
        r, rho, n = (np.asarray(x, dtype=np.float64) for x in zip(*per, strict=True))
        out.update(pearson=float(np.average(r, weights=n)),
                   spearman=float(np.average(rho, weights=n)),
                   pearson_mean=float(r.mean()), spearman_mean=float(rho.mean()),
                   n=float(n.sum()))
        if tick:
            tick()
        return out


def _year(y: int) -> type[STSYear]:
    cls = type(f"STS{y}", (STSYear,), {"name": f"STS{y % 100}", "year": y,
                                       "description": f"SemEval STS {y}, cosine, unsupervised"})
    return register(cls)


STS12, STS13, STS14, STS15, STS16 = (_year(y) for y in range(2012, 2017))
