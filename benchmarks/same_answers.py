"""Whether a change kept search answers identical: the `--json` answers of a fixed set of
queries, in every mode, saved from one checkout and compared with another's (same ids, same
scores, same order). A change meant to make searching cheaper, not different, must pass.

    python benchmarks/same_answers.py INDEX --save before.json     # on the old code
    python benchmarks/same_answers.py INDEX --against before.json  # on the new code

The queries mix common words, rare words the index's corpus gives rows of their own (names
from the first Wikipedia articles), casings, stop-words alone and words no model knows. Each
mode runs as one `qtsearch search` command, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERIES = [
    "volcano eruption",
    "Kobustan mud volcanoes near Baku",
    "KOBUSTAN ravines",
    "upheaving of the Eolian islands",
    "Anarchism Proudhon Bakunin",
    "stateless societies and voluntary institutions",
    "Andaman Islands geography",
    "Azerbaijani carpets and mugham",
    "ALGOL compilers",
    "Achilles tendon injury",
    "albedo of fresh snow",
    "abugida scripts of India",
    "Apollo 11 moon landing",
    "alchemy transmutation of lead into gold",
    "Ayn Rand objectivism",
    "Antarctica ice sheet melting",
    "Aristotle's Nicomachean Ethics",
    "who is it",
    "the",
    "zyxwvutq qqqqxr flarbistan",
]
MODES = ("hybrid", "semantic", "lexical")


def answers(index: Path, k: int) -> dict[str, list[dict[str, object]]]:
    """mode -> per query: its hits' (id, score) and its note/error."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    out: dict[str, list[dict[str, object]]] = {}
    for mode in MODES:
        run = subprocess.run([sys.executable, "-m", "qtsearch", "search", str(index), *QUERIES,
                              "-k", str(k), "--mode", mode, "--json"],
                             cwd=REPO, env=env, capture_output=True, text=True)
        if run.returncode not in (0, 3):  # 3: a bad query (stop-words only, unknown words)
            sys.exit(f"search --mode {mode} failed ({run.returncode}):\n{run.stderr}")
        out[mode] = [{"query": a["query"], "note": a.get("note"), "error": a.get("error"),
                      "hits": [[h["id"], h["score"]] for h in a.get("hits") or []]}
                     for a in json.loads(run.stdout)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path)
    parser.add_argument("-k", type=int, default=10)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--save", type=Path, help="Write the answers to this file.")
    what.add_argument("--against", type=Path, help="Compare the answers with this file.")
    args = parser.parse_args()
    got = answers(args.index, args.k)
    if args.save:
        args.save.write_text(json.dumps(got, indent=1), encoding="utf-8")
        hits = sum(len(a["hits"]) for mode in got.values() for a in mode)
        print(f"{hits} hits of {len(QUERIES)} queries x {len(MODES)} modes → {args.save}")
        return
    want = json.loads(args.against.read_text(encoding="utf-8"))
    differ = [(mode, n) for mode in MODES for n, (a, b) in enumerate(zip(got[mode], want[mode],
                                                                         strict=True)) if a != b]
    for mode, n in differ:
        print(f"{mode} {QUERIES[n]!r}:\n  now  {got[mode][n]}\n  then {want[mode][n]}")
    hits = sum(len(a["hits"]) for mode in got.values() for a in mode)
    print(f"{len(differ)} of {len(QUERIES) * len(MODES)} answers differ ({hits} hits compared)")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
