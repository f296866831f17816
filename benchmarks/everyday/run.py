"""Everyday questions and statements on a Wikipedia index, judged by a reader.

The queries and what makes a hit relevant (`queries.tsv`) were written down before any result
was read. Step 1 prints every mode's top 5 per query, each distinct hit text once, for a reader
to judge; step 2 counts the relevant hits per mode from the judgements (`judgements.tsv`:
query, 1 or 0, hit text), so a text judged once counts wherever it appears.

    qtsearch build-index ../shared/data/wikipedia/AA/wiki_{00..69}.gz -o /tmp/wiki510k
    python benchmarks/everyday/run.py /tmp/wiki510k --show > to_judge.txt   # then judge
    python benchmarks/everyday/run.py /tmp/wiki510k                          # the counts
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import qtsearch

HERE = Path(__file__).resolve().parent
MODES = ("hybrid", "semantic", "lexical")
K = 5


def queries() -> list[tuple[str, str]]:
    rows = (line.split("\t") for line in (HERE / "queries.tsv").read_text().splitlines()
            if line and not line.startswith("#"))
    return [(q, criterion) for q, criterion in rows]


def judgements(path: Path) -> dict[tuple[str, str], bool]:
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as fh:
        return {(q, text): verdict == "1" for q, verdict, text in csv.reader(fh, delimiter="\t")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("--show", action="store_true", help="Print the hits to judge.")
    parser.add_argument("--judgements", type=Path, default=HERE / "judgements.tsv")
    args = parser.parse_args()
    judged = judgements(args.judgements)
    totals = dict.fromkeys(MODES, 0)
    first = dict.fromkeys(MODES, 0)
    unjudged = 0
    with qtsearch.Index.open(args.index) as index:
        for q, criterion in queries():
            hits = {m: [h.text for h in index.search(q, k=K, mode=m)] for m in MODES}
            if args.show:
                print(f"## {q}\n#  relevant: {criterion}")
                for text in dict.fromkeys(t for m in MODES for t in hits[m]):
                    modes = ",".join(m[0] for m in MODES if text in hits[m])
                    mark = {True: "1", False: "0"}.get(judged.get((q, text)), "?")
                    print(f"{mark}\t[{modes}]\t{text}")
                continue
            for m in MODES:
                verdicts = [judged.get((q, t)) for t in hits[m]]
                unjudged += sum(v is None for v in verdicts)
                totals[m] += sum(bool(v) for v in verdicts)
                first[m] += bool(verdicts and verdicts[0])
    if not args.show:
        n = len(queries())
        print(f"| mode | relevant of {K * n} top-{K} hits | relevant first hits of {n} |")
        print("|---|---:|---:|")
        for m in MODES:
            print(f"| {m} | {totals[m]} | {first[m]} |")
        if unjudged:
            print(f"({unjudged} hits not judged yet: run with --show)")


if __name__ == "__main__":
    main()
