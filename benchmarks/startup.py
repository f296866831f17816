"""Start-up of the `qtsearch` command: `qtsearch --help`, a one-shot `qtsearch search … -k 10`
and the first answer of `qtsearch shell` on each index (the query piped in, the shell ending
at the end of its input), end to end (a fresh interpreter each run, as a user types them).

The default index is built once from one real book (default: Emma, running text split into
sentences, ~7k sentences) with the shipped model; --index DIR (repeatable) searches other
indexes instead, e.g. 100k and 1M Wikipedia sentences (docs/speed.md has the commands that
build them). Each command runs --runs times; printed per command: the median wall time, the
median CPU time of the child (user + system, from os.wait4), which on a loaded machine is the
better guide to what an idle one would take, and the median peak RSS. The page cache is warm
(a warm-up run of each command comes first): a cold cache adds the disk's time. With --base DIR
(another checkout of qtsearch, e.g. `git worktree add /tmp/startup-base <commit>`), every run
also runs there, interleaved with this checkout's, so both see the same load.

    python benchmarks/startup.py --runs 7 --base /tmp/startup-base

By default the interpreter caches bytecode in a fresh temporary folder (PYTHONPYCACHEPREFIX,
filled by a warm-up run), as an installed package runs; --no-bytecode-cache compiles
qtsearch's own modules at every start instead (PYTHONDONTWRITEBYTECODE=1 without a cache, as
in a sandbox that sets it). `python -c pass` and `import typer` are printed as the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO.parent / "shared" / "data" / "gutenberg" / "0003-austen-jane--emma.txt.gz"
QUERY = "She was very happy to see her old friend again."


def timed(argv: list[str], cwd: Path, env: dict[str, str], feed: str | None = None
          ) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one run of argv in a child process, with
    `feed` as its whole standard input (None: none)."""
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.PIPE)
    if child.stdin is not None:
        child.stdin.write((feed or "").encode())
        child.stdin.close()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"benchmark: {' '.join(argv)} failed ({child.returncode}) in {cwd}:\n"
                 f"{child.stderr.read().decode() if child.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # kB on Linux


def checkout_env(checkout: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment in which `python -m qtsearch` imports this checkout's package."""
    path = os.pathsep.join(p for p in (str(checkout), base.get("PYTHONPATH")) if p)
    return {**base, "PYTHONPATH": path}


def build_index(book: Path, out: Path, env: dict[str, str]) -> None:
    if (out / "manifest.json").is_file():
        return
    print(f"building the index of {book.name} → {out} (once)…", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "qtsearch", "build-index", str(book),
                    "--split-sentences", "-o", str(out), "-q"], cwd=REPO, env=env, check=True)


def sentences(index: Path) -> int:
    return int(json.loads((index / "manifest.json").read_text(encoding="utf-8"))["count"])


def shell_name(index: Path) -> str:
    return f"qtsearch shell (first answer, {sentences(index):,} sentences)"


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="Runs of each command (median).")
    parser.add_argument("--base", type=Path, help="Another qtsearch checkout to compare with.")
    parser.add_argument("--book", type=Path, default=BOOK, help="Running text to index.")
    parser.add_argument("--index", type=Path, action="append",
                        help="Index folder to search (repeatable; built from --book where "
                             "missing; default: the book's index in a temporary folder).")
    parser.add_argument("--query", default=QUERY, help="The one-shot query.")
    parser.add_argument("--no-bytecode-cache", action="store_true",
                        help="Compile qtsearch's modules at every start (no bytecode cache).")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="qt-startup-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        indexes = args.index or [Path(tmp) / "index"]
        for index in indexes:
            build_index(args.book, index, checkout_env(REPO, env))
        checkouts = {"this checkout": REPO}
        if args.base is not None:
            checkouts = {"base": args.base.resolve(), **checkouts}
        py, qt = [sys.executable], [sys.executable, "-m", "qtsearch"]
        commands = {
            "python -c pass (floor)": [*py, "-c", "pass"],
            "python -c 'import typer' (floor)": [*py, "-c", "import typer"],
            "qtsearch --help": [*qt, "--help"],
            **{f"qtsearch search (one query, {sentences(index):,} sentences)":
               [*qt, "search", str(index), args.query, "-k", "10"] for index in indexes},
            **{shell_name(index): [*qt, "shell", str(index)] for index in indexes},
        }
        # the shell's first answer: the query piped in, the shell closing at the end of input
        feeds = {shell_name(index): f"{args.query}\n" for index in indexes}
        floors = [name for name in commands if name.endswith("(floor)")]
        runs = [(name, label, checkout) for name in commands
                for label, checkout in checkouts.items()
                if name not in floors or label == "this checkout"]
        for name, _, checkout in runs:  # warm-up: bytecode, page cache
            timed(commands[name], checkout, checkout_env(checkout, env), feeds.get(name))
        load_before = load_average()
        times: dict[tuple[str, str], list[tuple[float, float, float]]] = {
            r[:2]: [] for r in runs}
        for _ in range(args.runs):  # interleaved: every variant sees the same load
            for name, label, checkout in runs:
                times[name, label].append(timed(commands[name], checkout,
                                                checkout_env(checkout, env), feeds.get(name)))

    what = (f"indexes: {', '.join(map(str, args.index))}" if args.index
            else f"index: {args.book.name} (running text, split)")
    print(f"\n{cpu_name()}, {os.cpu_count()} CPUs; load average {load_before} before, "
          f"{load_average()} after; median of {args.runs} runs; bytecode "
          f"{'not cached' if args.no_bytecode_cache else 'cached'}; {what}\n")
    print("| command | checkout | wall s (median) | CPU s (median) | peak RSS MB (median) |")
    print("|---|---|---:|---:|---:|")
    for (name, label), values in times.items():
        wall, cpu, peak = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"| `{name}` | {label if name not in floors else '—'} | {wall:.2f} | {cpu:.2f} "
              f"| {peak:.0f} |")


if __name__ == "__main__":
    main()
