"""Where is a model's weak-match threshold? The cosine of related and unrelated sentence pairs.

STS-B dev pairs are encoded as queries of an index (its fitted transform applied, as a search
applies it) and in the model's raw space; the cosines of pairs graded 4 or more (paraphrases),
of pairs graded 1 or less, and of random pairs (one fixed shuffle) are compared for each
candidate threshold. The shipped model's WEAK_COSINE (qtsearch.search.explain) and the table
in docs/scores.md come from this script on the demo index (`qtsearch demo`):

    python benchmarks/weak_cosine.py indexes/demo
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from qtsearch import Index

STS_DEV = Path(__file__).resolve().parents[2] / "shared/data/sts/stsbenchmark/sts-dev.csv"


def pairs(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    a, b, gold = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = line.split("\t")
        if len(cells) >= 7:
            gold.append(float(cells[4]))
            a.append(cells[5])
            b.append(cells[6])
    return a, b, np.array(gold)


def report(name: str, va: np.ndarray, vb: np.ndarray, gold: np.ndarray) -> None:
    cos = (va * vb).sum(1)
    perm = np.random.default_rng(0).permutation(len(gold))
    rand = (va * vb[perm]).sum(1)[perm != np.arange(len(gold))]
    groups = {"gold >= 4": cos[gold >= 4], "gold <= 1": cos[gold <= 1], "random": rand}
    print(name)
    for label, c in groups.items():
        print(f"  {label}: n {len(c)}, p5 {np.percentile(c, 5):.3f}, median "
              f"{np.median(c):.3f}, p90 {np.percentile(c, 90):.3f}, p99 {np.percentile(c, 99):.3f}")
    for t in np.arange(0.25, 0.61, 0.05):
        shares = ", ".join(f"{label} {np.mean(c >= t):.3f}" for label, c in groups.items())
        print(f"  share at or above {t:.2f}: {shares}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("index", type=Path, help="an index built with the model to measure")
    parser.add_argument("--pairs", type=Path, default=STS_DEV)
    args = parser.parse_args()
    a, b, gold = pairs(args.pairs)
    with Index.open(args.index, device="cpu") as idx:
        report("index space", idx.embed(a), idx.embed(b), gold)
        report("raw model space", idx.encoder.encode(a, normalize=True),
               idx.encoder.encode(b, normalize=True), gold)


if __name__ == "__main__":
    main()
