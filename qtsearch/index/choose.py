"""Which faiss index to build, from corpus size, dimension and memory (as autofaiss does).

The rules, smallest corpus first:
- **flat** (exact inner product) below `FLAT_MAX` vectors: search over < 50k vectors is a few
  milliseconds even exhaustively, and nothing beats exact recall.
- **sq8** (scalar quantizer, exhaustive) up to `SQ8_MAX`: 8-bit codes are 4x smaller than
  flat and a scan of ≤ 300k codes is still interactive. 8 bits per dimension lose recall when
  a model's vectors sit very close together (a barely trained model: neighbours differ in
  the fourth decimal of their cosine), so the builder measures recall@10 against exact search
  and falls back to fp16 codes (2x smaller than flat, recall ≈ 0.97+) when 8-bit codes miss
  the target.
- **hnsw** beyond that, where the graph fits in the memory budget: on 1M Gutenberg sentences
  of the shipped model a query answers in 4.5 ms end to end (hybrid) against 35 ms with
  IVF-PQ, which had to probe half its lists for recall 0.95 on these vectors; the price is
  the build (graph construction: 3.8 min against 1.3 min for 1M x 256 on 2 cores) and full
  vectors in the index (1.5 GB against 0.9 GB). Repeated vectors share one node (fold.py).
- **ivf-pq** where the graph does not fit: an inverted file with ≈ √n lists (a power of two,
  at least 39 training points per list, faiss's own floor), PQ codes for the scan and a
  refine stage on fp16 codes that re-ranks a shortlist of `k_factor_rf`·k, so recall stays
  high while each query touches only `nprobe` lists. nprobe (and, if needed, the shortlist
  factor) are then tuned on corpus queries for recall@10 ≥ 0.95. (8-bit refine codes capped
  recall at 0.57 on a small model's tightly packed vectors, hence fp16.) When even that does
  not fit in memory, the refine codes are dropped (PQ codes only: much smaller, lower
  recall). An explicit `--index TYPE` is honoured even where auto would choose otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from qtsearch.errors import UsageError
from qtsearch.index.manifest import INDEX_TYPES

FLAT_MAX = 50_000
SQ8_MAX = 300_000
#: Index memory may use at most this share of the memory available now.
MEMORY_SHARE = 0.5
#: faiss warns below 39 training points per centroid.
MIN_POINTS_PER_CENTROID = 39
#: Links per node of an HNSW graph, faiss's usual 32. With one node per sentence the shipped
#: model's copies made islands and M=64 helped (200k: efSearch 128 against 512); with copies
#: folded (fold.py), on 1M Gutenberg sentences M=32 (efSearch 256) answers a hybrid query as
#: fast as M=64 (efSearch 128): 4.54 against 4.53 ms p50, built in 226 s against 335 s.
HNSW_M = 32
#: Recall@10 that nprobe / efSearch tuning aims for.
TARGET_RECALL = 0.95
#: PQ sub-quantizer counts faiss-gpu supports; we use the same list on CPU for portability.
#: faiss GPU kernels probe at most this many lists: nprobe candidates stay below it so the
#: tuned parameters also work for a GPU copy of the index.
GPU_MAX_K = 2048
PQ_M_CHOICES = (64, 56, 48, 40, 32, 28, 24, 20, 16, 12, 8, 4, 3, 2, 1)
#: Shortlist factors (k_factor_rf) tried for the refine stage, smallest first.
REFINE_K_FACTORS = [4, 8, 16, 32, 64, 128, 256]


@dataclass
class IndexChoice:
    """The index to build: type (manifest name), faiss factory key, why, and how to tune."""

    index_type: str
    key: str
    why: str
    bytes_estimate: int
    #: the search-time parameter to tune (ParameterSpace name) and its candidate values
    tune: str | None = None
    candidates: list[int] = field(default_factory=list)
    #: an outer parameter tried in increasing order when `tune` alone misses the target
    outer: str | None = None
    outer_candidates: list[int] = field(default_factory=list)
    #: a more precise key to rebuild with when the measured recall misses the target
    fallback_key: str | None = None
    train_size: int = 0


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable), 8 GiB when it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _pow2_floor(x: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(1.0, x))))


def _pow2_round(x: float) -> int:
    return 1 << max(0, round(math.log2(max(1.0, x))))


def ivf_lists(n: int) -> int:
    """≈ √n lists, the nearest power of two, ≥ 39 points each, ≥ 1.

    autofaiss starts at 4·√n, but k-means costs O(points · nlist · d · iterations): for 1M x
    1200 on 2 cores (~300 GFLOP/s fp32) that is an estimated ~160 s of training with 4096
    lists against ~13 s with 1024. With √n lists a query at nprobe 32 still scans only ~3% of
    the PQ codes."""
    return max(1, min(_pow2_round(math.sqrt(n)), _pow2_floor(n / MIN_POINTS_PER_CENTROID)))


def pq_m(dim: int) -> int:
    """Sub-quantizers: the largest supported divisor of dim with ≥ 4 dims each (PQ fidelity
    falls quickly below that), capped at 64 bytes per code."""
    for m in PQ_M_CHOICES:
        if dim % m == 0 and dim // m >= 4:
            return m
    return 1


def pq_bits(n: int) -> int:
    """8 bits per code when there are enough points to train 256 centroids, else fewer."""
    return max(4, min(8, int(math.log2(max(16, n / MIN_POINTS_PER_CENTROID)))))


def _candidates(limit: int) -> list[int]:
    values, v = [], 1
    while v < limit:
        values.append(v)
        v *= 2
    values.append(limit)
    return sorted(set(values))


def choose_index(n: int, dim: int, requested: str = "auto",
                 memory: int | None = None) -> IndexChoice:
    """The index for `n` vectors of `dim` dimensions; `requested` is auto or an index type."""
    if requested != "auto" and requested not in INDEX_TYPES:
        raise UsageError(f"--index must be auto or one of {', '.join(INDEX_TYPES)}, "
                         f"not {requested!r}")
    memory = available_memory() if memory is None else memory
    budget = int(memory * MEMORY_SHARE)
    flat_bytes = n * dim * 4
    sq8_bytes = n * dim
    size = f"{n:,} vectors x {dim} dims"

    def flat(why: str) -> IndexChoice:
        return IndexChoice("flat", "Flat", why, flat_bytes)

    def sq8(why: str) -> IndexChoice:
        return IndexChoice("sq8", "SQ8", why, sq8_bytes, fallback_key="SQfp16",
                           train_size=min(n, 100_000))

    def hnsw(why: str) -> IndexChoice:
        return IndexChoice("hnsw", f"HNSW{HNSW_M}", why, flat_bytes + n * HNSW_M * 2 * 4,
                           tune="efSearch", candidates=[16, 32, 64, 128, 256, 512, 1024])

    def ivf_pq(why: str, refine: bool = True) -> IndexChoice:
        nlist = ivf_lists(n)
        m = pq_m(dim)
        bits = pq_bits(n)
        key = f"IVF{nlist},PQ{m}x{bits}" + (",Refine(SQfp16)" if refine else "")
        nbytes = n * (m + 8 + (2 * dim if refine else 0)) + nlist * dim * 4
        # 64 points per list (faiss asks ≥ 39) and enough for 256 PQ centroids per sub-space
        train = min(n, max(nlist * 64, 256 * MIN_POINTS_PER_CENTROID), 200_000)
        return IndexChoice("ivf-pq", key, why, nbytes, tune="nprobe",
                           candidates=_candidates(min(nlist, GPU_MAX_K)),
                           outer="k_factor_rf" if refine else None,
                           outer_candidates=REFINE_K_FACTORS if refine else [],
                           train_size=train)

    if requested == "flat":
        return flat(f"asked for: exact search over {size}, {_gb(flat_bytes)}")
    if requested == "sq8":
        return sq8(f"asked for: 8-bit scalar quantizer over {size}, {_gb(sq8_bytes)}")
    if requested == "hnsw":
        return hnsw(f"asked for: HNSW graph (M={HNSW_M}) over {size}; efSearch tuned for "
                    f"recall@10 ≥ {TARGET_RECALL}")
    if requested == "ivf-pq":
        return ivf_pq(f"asked for: inverted file + product quantizer over {size}; nprobe "
                      f"tuned for recall@10 ≥ {TARGET_RECALL}")

    avail = f"{_gb(memory)} available, budget {_gb(budget)}"
    if n < FLAT_MAX and flat_bytes <= budget:
        return flat(f"{size} < {FLAT_MAX:,}: exact search is fast at this size "
                    f"({_gb(flat_bytes)}; {avail})")
    if n < SQ8_MAX and sq8_bytes <= budget:
        return sq8(f"{size}: flat would take {_gb(flat_bytes)}; 8-bit codes take "
                   f"{_gb(sq8_bytes)} at near-exact recall and a scan of < {SQ8_MAX:,} codes "
                   f"stays interactive ({avail})")
    graph = hnsw("")
    if graph.bytes_estimate <= budget:
        graph.why = (f"{size} ≥ {SQ8_MAX:,}: exhaustive search would scan {_gb(sq8_bytes)}+ "
                     f"per query; an HNSW graph (M={HNSW_M}) answers in milliseconds, "
                     f"{_gb(graph.bytes_estimate)} ({avail}); slower to build than IVF-PQ "
                     f"(--index ivf-pq: smaller, builds ~3x faster, queries ~8x slower); "
                     f"efSearch tuned for recall@10 ≥ {TARGET_RECALL}")
        return graph
    c = ivf_pq("")
    if c.bytes_estimate <= budget:
        c.why = (f"{size}: an HNSW graph would need {_gb(graph.bytes_estimate)}, over the "
                 f"memory budget ({avail}); {c.key} probes a few of its lists and re-ranks "
                 f"with fp16 codes, {_gb(c.bytes_estimate)}; nprobe tuned for recall@10 ≥ "
                 f"{TARGET_RECALL}")
        return c
    small = ivf_pq("", refine=False)
    small.why = (f"{size}: {c.key} would need {_gb(c.bytes_estimate)}, over the memory budget "
                 f"({avail}); PQ codes alone take {_gb(small.bytes_estimate)} (lower recall)")
    return small
