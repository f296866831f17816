"""Load benchmark of `qtsearch serve`: N concurrent clients on the loopback address.

Starts the real command (`qtsearch serve INDEX`, its own process, on a free loopback port) or
uses a running server (`--url`), then for each client count in `--clients` runs that many
threads, each with its own keep-alive HTTP connection, sending `GET /search` round-robin over
held-out query sentences until `--requests` requests were sent or `--max-seconds` passed,
whichever comes first: every level stops by itself. A request counts as an error unless it
answers 200 with one answer of k hits and no error. Reported per level: requests, errors,
throughput (requests/s), client-side latency p50/p95/p99/max, the server process's CPU seconds
per request (Linux /proc), the latency of a `GET /health` sent every 0.1 s from a process of
its own while the level runs, and the load average before and after (the machine is shared).

    python benchmarks/serve_load.py /tmp/lat/hnsw_100000 \
        --queries /tmp/lat/gutenberg_100000.queries.json --clients 1 8 32 64 --requests 3000

Queries: `--queries FILE` (a JSON list, or one sentence a line); by default the held-out
sentences that follow the index's corpus in the Gutenberg books (an index built by
benchmarks/query_latency.py or build_index.py from the first N book sentences).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import multiprocessing
import os
import platform
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def read_queries(path: Path | None, index: Path, n: int) -> list[str]:
    from query_latency import queries_after, query_file

    return queries_after(index, n) if path is None else query_file(path)[:n]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path, workers: int | None, timeout: float,
                 threads: int | None = None) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "qtsearch.app.cli", "serve", str(index),
                             "--port", str(port),
                             *(["--workers", str(workers)] if workers else []),
                             *(["--threads", str(threads)] if threads else [])])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"serve_load: the server exited with status {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    sys.exit(f"serve_load: the server did not answer within {timeout:.0f} s")


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU of a process and its waited-for children (worker processes count
    once they exit; a single-process server counts fully), from /proc; None elsewhere."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return None
    ticks = sum(int(f) for f in fields[11:15])
    total = ticks / os.sysconf("SC_CLK_TCK")
    return total + sum(cpu_seconds(c) or 0.0 for c in children)


#: Seconds between the /health probes sent while a load level runs.
HEALTH_EVERY = 0.1


def probe_health(host: str, port: int, stop: Any, results: Any) -> None:
    """GET /health every HEALTH_EVERY seconds on a connection of its own until `stop` is set,
    then send the latencies (seconds) through `results`: how long a liveness check waits
    behind the searches."""
    conn = http.client.HTTPConnection(host, port, timeout=120)
    seconds = []
    while not stop.wait(HEALTH_EVERY):
        t = time.perf_counter()
        conn.request("GET", "/health")
        conn.getresponse().read()
        seconds.append(time.perf_counter() - t)
    conn.close()
    results.send(seconds)


def run_level(url: str, queries: list[str], clients: int, requests: int, max_seconds: float,
              k: int, mode: str | None) -> dict[str, Any]:
    """`clients` threads sending up to `requests` searches in all, for at most `max_seconds`."""
    parsed = urllib.parse.urlsplit(url)
    counter = itertools.count()
    latencies: list[float] = []
    errors: list[str] = []
    sent = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + max_seconds

    def client() -> None:
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
        mine: list[float] = []
        wrong: list[str] = []
        tried = 0
        while (n := next(counter)) < requests and time.monotonic() < deadline:
            tried += 1
            params = {"q": queries[n % len(queries)], "k": k, **({"mode": mode} if mode else {})}
            path = "/search?" + urllib.parse.urlencode(params)
            t = time.perf_counter()
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                body = response.read()
                mine.append(time.perf_counter() - t)
                answers = json.loads(body)
                if response.status != 200 or len(answers) != 1 or answers[0]["error"] or \
                        len(answers[0]["hits"]) != k:
                    wrong.append(f"{response.status}: {body[:200]!r}")
            except (OSError, http.client.HTTPException, ValueError) as e:
                wrong.append(f"{type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors.extend(wrong)
            sent[0] += tried

    # the probe runs in a process of its own: a thread here would wait for this process's
    # GIL behind the client threads and time that, not the server
    stop = multiprocessing.Event()
    answers, results = multiprocessing.Pipe(duplex=False)
    prober = multiprocessing.Process(target=probe_health,
                                     args=(parsed.hostname, parsed.port, stop, results))

    prober.start()  # forked before the client threads exist
    threads = [threading.Thread(target=client) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    stop.set()
    health = answers.recv()
    prober.join()
    ms = np.asarray(latencies) * 1000 if latencies else np.zeros(1)
    health_ms = np.asarray(health) * 1000 if health else np.zeros(1)
    return {"clients": clients, "requests": sent[0], "errors": len(errors),
            "health_p50_ms": round(float(np.median(health_ms)), 2),
            "health_max_ms": round(float(health_ms.max()), 2),
            "error_examples": errors[:3], "seconds": round(seconds, 2),
            "throughput_rps": round(len(latencies) / seconds, 1),
            **{f"p{p}_ms": round(float(np.percentile(ms, p)), 2) for p in (50, 95, 99)},
            "max_ms": round(float(ms.max()), 2)}


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of a process (Linux /proc), in MB; None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        pass
    return None


def run_hostile(url: str, queries: list[str], clients: int, pid: int | None) -> dict[str, Any]:
    """`clients` requests at once, each asking for 100 queries × k=1000 in a 4 KB body (an
    amplification: before the server's budgets, 29 MB and 10-42 s of CPU each): their statuses,
    the slowest answer, the answer bytes, and the server's memory before and after."""
    parsed = urllib.parse.urlsplit(url)
    body = json.dumps({"q": [queries[i % len(queries)] for i in range(100)], "k": 1000})
    results: list[tuple[int, float, int]] = []
    lock = threading.Lock()

    def client() -> None:
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=600)
        t = time.perf_counter()
        conn.request("POST", "/search", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        size = len(response.read())
        with lock:
            results.append((response.status, time.perf_counter() - t, size))
        conn.close()

    before = rss_mb(pid)
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"clients": clients, "request_bytes": len(body),
            "statuses": sorted({r[0] for r in results}),
            "max_ms": round(max(r[1] for r in results) * 1000, 2),
            "answer_bytes": max(r[2] for r in results),
            "rss_mb_before": before, "rss_mb_after": rss_mb(pid)}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| clients | requests | errors | req/s | p50 ms | p95 ms | p99 ms | max ms | "
             "server CPU ms/req | /health p50 / max ms | load avg before → after |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        cpu = f"{r['server_cpu_ms_per_request']:.1f}" if r.get(
            "server_cpu_ms_per_request") is not None else "—"
        lines.append(f"| {r['clients']} | {r['requests']:,} | {r['errors']} | "
                     f"{r['throughput_rps']:,.1f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                     f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} | {cpu} | "
                     f"{r['health_p50_ms']:.1f} / {r['health_max_ms']:.1f} | "
                     f"{r['load_before']:.1f} → {r['load_after']:.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", type=Path, help="Index folder to serve (and to find queries for).")
    ap.add_argument("--url", help="A running server instead of starting one.")
    ap.add_argument("--queries", type=Path, help="JSON list or one query a line.")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 64])
    ap.add_argument("--requests", type=int, default=2000, help="Per client count.")
    ap.add_argument("--max-seconds", type=float, default=120, help="Per client count.")
    ap.add_argument("--warmup", type=int, default=200, help="Requests before measuring.")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--mode", default=None, help="hybrid | semantic | lexical (default: the "
                                                  "index's own).")
    ap.add_argument("--workers", type=int, default=None,
                    help="Server worker processes (default: serve's own, one per core).")
    ap.add_argument("--threads", type=int, default=None,
                    help="Requests each worker works on at once (serve --threads).")
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    ap.add_argument("--hostile", type=int, default=4, help="Then this many amplifying requests "
                    "at once (100 queries × k=1000 each; 0: none).")
    args = ap.parse_args()

    queries = read_queries(args.queries, args.index, max(args.requests, 1000))
    if not queries:
        sys.exit("serve_load: no queries")
    proc, url = (None, args.url) if args.url else start_server(args.index, args.workers,
                                                               args.start_timeout, args.threads)
    pid = proc.pid if proc else None
    rows = []
    try:
        log(f"serve_load: {url}, {len(queries):,} distinct queries; warming up")
        run_level(url, queries, 1, args.warmup, args.max_seconds, args.k, args.mode)
        for clients in args.clients:
            load_before = os.getloadavg()[0]
            cpu_before = cpu_seconds(pid)
            row = run_level(url, queries, clients, args.requests, args.max_seconds, args.k,
                            args.mode)
            cpu_after = cpu_seconds(pid)
            row["load_before"], row["load_after"] = load_before, os.getloadavg()[0]
            if cpu_before is not None and cpu_after is not None and row["requests"]:
                row["server_cpu_ms_per_request"] = round(
                    (cpu_after - cpu_before) * 1000 / row["requests"], 2)
            log(f"  {clients} clients: {row['throughput_rps']} req/s, p50 {row['p50_ms']} ms, "
                f"p99 {row['p99_ms']} ms, {row['errors']} errors")
            rows.append(row)
        hostile = run_hostile(url, queries, args.hostile, pid) if args.hostile else None
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    table = markdown(rows)
    if hostile:
        rss = (f"{hostile['rss_mb_before']:.0f} → {hostile['rss_mb_after']:.0f} MB"
               if hostile["rss_mb_before"] is not None else "—")
        table += (f"\n\nhostile: {hostile['clients']} × POST /search of 100 queries × k=1000 "
                  f"({hostile['request_bytes']:,} bytes each): status "
                  f"{', '.join(map(str, hostile['statuses']))}, slowest {hostile['max_ms']:.1f} "
                  f"ms, answer {hostile['answer_bytes']:,} bytes, server RSS {rss}")
    print(table)
    if args.json:
        args.json.write_text(json.dumps({
            "index": str(args.index), "k": args.k, "mode": args.mode, "workers": args.workers,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "rows": rows,
            "hostile": hostile,
            "table": table}, indent=2), encoding="utf-8")
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
