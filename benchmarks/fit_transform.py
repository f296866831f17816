"""Choose `build-index --fit` by measurement: paraphrase retrieval on STS-B, and IVF probes.

1. Paraphrase retrieval (the default of `--fit`): for each split of STS-B (train, dev), the
   pool is every sentence of the split, each pair with gold >= 4 queries its first sentence,
   and the rank of its second sentence among the pool (the query itself left out) gives
   R@1, R@10 and MRR@10. Vectors: the model's (default: the shipped one), L2-normalised, then
   each `--fit` candidate fitted on the pool (as a build fits on its corpus) and applied to
   pool and queries alike. Search is exact (cosine), as a flat index does.

2. IVF probes (`--ivf N`): N Gutenberg sentences embedded, IVF-Flat with 4*sqrt(N) lists
   trained per candidate; printed is the smallest nprobe reaching recall@10 >= 0.95 against
   exact search in the same space, on 500 corpus queries. With --ivf-pq, also the builder's
   own `--index ivf-pq` stage per candidate (its tuned nprobe and measured recall).

    python benchmarks/fit_transform.py                      # the STS-B table (README)
    python benchmarks/fit_transform.py --fits none --ivf 100000 \
        --ivf-fits none centre abtt:8 whiten:512           # the IVF probes
    python benchmarks/fit_transform.py --fits none --ivf 100000 --ivf-fits none whiten:768 --ivf-pq
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from qtsearch.encoders.registry import load_encoder  # noqa: E402
from qtsearch.index.transform import VectorTransform  # noqa: E402

DATA = REPO.parent / "shared" / "data"
FITS = ["none", "centre", "abtt:2", "abtt:8", "abtt:32", "whiten:128", "whiten:256",
        "whiten:512", "whiten:768", "whiten:1024"]


def sts_split(path: Path) -> tuple[list[str], list[tuple[int, int]]]:
    """(pool of distinct sentences, (query row, target row) for every pair with gold >= 4)."""
    pool: dict[str, int] = {}
    pairs = []
    with open(path, encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
            a, b = row[5].strip(), row[6].strip()
            ia, ib = (pool.setdefault(s, len(pool)) for s in (a, b))
            if float(row[4]) >= 4 and ia != ib:
                pairs.append((ia, ib))
    return list(pool), pairs


def retrieval(x: np.ndarray, pairs: list[tuple[int, int]]) -> dict[str, float]:
    q = np.array([a for a, _ in pairs])
    target = np.array([b for _, b in pairs])
    scores = x[q] @ x.T
    scores[np.arange(len(q)), q] = -np.inf  # the query itself is not an answer
    rank = (scores > scores[np.arange(len(q)), target][:, None]).sum(axis=1) + 1
    return {"R@1": float(np.mean(rank == 1)), "R@10": float(np.mean(rank <= 10)),
            "MRR@10": float(np.mean(np.where(rank <= 10, 1.0 / rank, 0.0)))}


def probes_for_recall(x: np.ndarray, target: float = 0.95) -> tuple[int, int]:
    """(nlist, smallest nprobe with recall@10 >= target) of an IVF-Flat on `x`."""
    from qtsearch.index.faiss_backend import FaissBuilder
    from qtsearch.index.recall import exact_neighbours, measure_recall

    n, dim = x.shape
    nlist = int(4 * np.sqrt(n))
    builder = FaissBuilder(f"IVF{nlist},Flat", dim, "cpu")
    rng = np.random.default_rng(0)
    builder.train(x[rng.choice(n, size=min(n, 40 * nlist), replace=False)])
    builder.add(x)
    queries = x[rng.choice(n, size=500, replace=False)]
    truth = exact_neighbours(queries, iter([x]), 10)
    for nprobe in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, nlist):
        if measure_recall(builder.index, {"nprobe": min(nprobe, nlist)}, queries,
                          truth) >= target:
            return nlist, min(nprobe, nlist)
    return nlist, nlist


def builder_ivf_pq(x: np.ndarray, out: Path) -> dict:
    """The builder's own `--index ivf-pq` stage on `x` (nprobe tuned for recall@10 0.95)."""
    from qtsearch.core.progress import Reporter
    from qtsearch.indexing.index_stage import IndexStage

    step = 50_000
    stage = IndexStage(lambda: (x[i:i + step] for i in range(0, len(x), step)), len(x),
                       -(-len(x) // step), Reporter())  # silent
    return stage.run(x.shape[1], "ivf-pq", "cpu", out)


def gutenberg(n: int) -> list[str]:
    from qtsearch.text.reader import list_files, read_sentences

    files = [str(f) for f in list_files([str(DATA / "gutenberg")])]
    out = []
    for s in read_sentences(files, split=True):
        out.append(s.text)
        if len(out) == n:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="model folder or name (default: shipped)")
    ap.add_argument("--fits", nargs="+", default=FITS)
    ap.add_argument("--ivf", type=int, default=0, help="sentences for the IVF probe experiment")
    ap.add_argument("--ivf-fits", nargs="+", default=["none", "abtt:8", "whiten:512"])
    ap.add_argument("--ivf-pq", action="store_true",
                    help="also build --index ivf-pq through the builder for each --ivf-fits")
    args = ap.parse_args()
    encoder = load_encoder(args.model, device="cpu")
    print(f"model: {encoder.name} (dim {encoder.dim})")
    splits = {}
    for name in ("train", "dev"):
        pool, pairs = sts_split(DATA / "sts" / "stsbenchmark" / f"sts-{name}.csv")
        splits[name] = (encoder.encode(pool, normalize=True), pairs)
        print(f"STS-B {name}: pool {len(pool):,} sentences, {len(pairs):,} pairs with gold >= 4")
    print(f"{'fit':<12}" + "".join(f"{s + ' ' + m:>14}" for s in splits
                                    for m in ("R@1", "R@10", "MRR@10")))
    for spec in args.fits:
        cells = []
        for x, pairs in splits.values():
            t = VectorTransform.fit(x, spec)
            m = retrieval(t.apply(x) if t else x, pairs)
            cells += [m["R@1"], m["R@10"], m["MRR@10"]]
        print(f"{spec:<12}" + "".join(f"{c:>14.3f}" for c in cells))
    if args.ivf:
        t0 = time.perf_counter()
        x = encoder.encode(gutenberg(args.ivf), normalize=True)
        print(f"\nIVF: {len(x):,} Gutenberg sentences embedded in {time.perf_counter() - t0:.0f} s")
        for spec in args.ivf_fits:
            t = VectorTransform.fit(x[:50_000], spec)
            y = t.apply(x) if t else x
            nlist, nprobe = probes_for_recall(y)
            print(f"{spec:<12} IVF{nlist}: nprobe {nprobe} for recall@10 >= 0.95")
            if args.ivf_pq:
                with tempfile.TemporaryDirectory() as tmp:
                    info = builder_ivf_pq(y, Path(tmp) / "index.faiss")
                print(f"{spec:<12} {info['key']}: {info['params']}, {info['recall']}")


if __name__ == "__main__":
    main()
