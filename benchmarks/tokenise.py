"""Tokenising throughput of the build (sentence → vocabulary ids, `token_ids` with the shipped
model's vocabulary): in this thread, in threads, and in worker processes (qtsearch.indexing.tokens,
what the build uses beside a GPU), on the first N sentences of the Gutenberg books.

BlingFire's C call releases the GIL, but the Python around it (scrubbing, the UTF-8 round trip,
splitting, the vocabulary lookups) holds it: the "C call only" row is the share threads could
run in parallel. Each variant runs --runs times, interleaved; medians. The process rows include
starting the workers (what a build pays once).

    python benchmarks/tokenise.py --sentences 50000 --runs 3
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUTENBERG = REPO.parent / "shared" / "data" / "gutenberg"


def main() -> None:
    from qtsearch.core.device import cpus
    from qtsearch.indexing.tokens import CHUNK, token_shards
    from qtsearch.text import tokenizer
    from qtsearch.text.reader import read_sentences
    from qtsearch.text.vocab import Vocab

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=sorted({2, cpus()}))
    args = parser.parse_args()

    books = [str(b) for b in sorted(GUTENBERG.glob("*.txt.gz"))]
    texts = [s.text for s in itertools.islice(read_sentences(books, split=True),
                                              args.sentences)]
    vocab = Vocab.load(REPO / "qtsearch" / "default_model" / "vocab.json")
    max_len = 50
    chunks = [texts[i : i + CHUNK] for i in range(0, len(texts), CHUNK)]
    encoded = [t.encode("utf-8") for t in texts]

    def ids(chunk: list[str]) -> list[list[int]]:
        return [tokenizer.token_ids(vocab, t, max_len) for t in chunk]

    def c_call_only() -> None:
        buffer = tokenizer._buffer(1 << 16)
        for data in encoded:
            tokenizer._LIB.TextToWords(data, len(data), buffer, len(buffer))

    def threads(n: int) -> Callable[[], object]:
        def run() -> object:
            with ThreadPoolExecutor(n) as pool:
                return list(pool.map(ids, chunks))
        return run

    def processes(n: int) -> Callable[[], object]:
        def run() -> object:  # one shard of all the sentences: the pool starts, then works
            return list(token_shards(lambda _: texts, [0], vocab, max_len, n))
        return run

    variants: dict[str, Callable[[], object]] = {
        "BlingFire C call only, 1 thread": c_call_only,
        "token ids, 1 thread": lambda: [ids(c) for c in chunks],
    }
    for n in args.workers:
        variants[f"token ids, {n} threads"] = threads(n)
        variants[f"token ids, {n} processes (incl. start)"] = processes(n)
    assert processes(2)() == [ids(texts)], "workers must give the serial ids"

    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(f"\n{len(texts):,} Gutenberg sentences, {cpus()} CPUs, load average {load}, "
          f"median of {args.runs}\n")
    print("| variant | seconds | sentences/s | µs / sentence |")
    print("|---|---:|---:|---:|")
    for name, values in times.items():
        s = statistics.median(values)
        print(f"| {name} | {s:.2f} | {len(texts) / s:,.0f} | {s / len(texts) * 1e6:.1f} |")


if __name__ == "__main__":
    main()
