"""Which faiss index to build, from corpus size, dimension and memory (as autofaiss does).

The rules, smallest corpus first:
- **flat** (exact inner product) below `FLAT_MAX` vectors: search over < 50k vectors is a few
  milliseconds even exhaustively, and nothing beats exact recall.
- **sq8** (scalar quantizer, exhaustive) up to `SQ8_MAX`: 8-bit codes are 4x smaller than
  flat and a scan of ≤ 300k codes is still interactive. 8 bits per dimension lose recall when
  a model's vectors sit very close together (a barely trained model: neighbours differ in
  the fourth decimal of their cosine), so the builder measures recall@10 against exact search
  and falls back to fp16 codes (2x smaller than flat) when 8-bit codes miss
  the target.
- **ivf** beyond that, while the cost model says its query stays within `QUERY_BUDGET_MS`:
  an inverted file of ≈ √n lists (faiss's spherical k-means on a sample of 64 points per
  list) holding 8-bit codes, rebuilt with fp32 vectors when 8-bit codes miss the recall
  target; nprobe tuned for it. Built in seconds (training and one assignment pass, no graph).
  A query scans nprobe lists; on the shipped model's tightly packed vectors the recall target
  needs a fixed share of the codes scanned (`IVF_PROBED_SHARE`), so the scan grows with n.
- **hnsw** beyond the query budget, where the graph fits in memory: an HNSW graph answers in
  well under a millisecond at any size, but its construction costs many times the inverted
  file's. Repeated vectors share one node (fold.py).
- **ivf-pq** where not even 8-bit codes fit in memory: PQ codes alone (lower recall); asked
  for (`--index ivf-pq`), with a refine stage on fp16 codes. PQ ranks the shipped model's
  tightly packed vectors poorly (below the recall target even with a re-ranking stage), so
  auto prefers the others.
  An explicit `--index TYPE` is honoured even where auto would choose otherwise.

The measurements behind these rules and the constants below are in docs/speed.md, "Index
candidates on the same vectors" and "What auto picks, and why".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from qtsearch.core.errors import UsageError
from qtsearch.index.names import INDEX_TYPES

FLAT_MAX = 50_000
SQ8_MAX = 300_000
#: `--fit` when not given: WHITEN for corpora that `--index auto` searches exhaustively (under
#: SQ8_MAX sentences: flat, sq8), PARTITIONED from there on, where it builds a graph (or an IVF
#: index). By corpus size, not index type, so every index of one corpus holds the same
#: vectors. Whitening also slows a graph (a far larger efSearch for the same recall). Chosen
#: by benchmarks/fit_transform.py (docs/indexing.md, "BM25 files, fitted vectors, other
#: encoders"): on STS-B paraphrase retrieval with the shipped model, whitening to 768 dims
#: scored best, but whitened vectors lose the clusters an IVF index relies on (many times the
#: probes for the same recall), while centring keeps them.
DEFAULT_FIT = "auto"
WHITEN = "whiten:768"
PARTITIONED = "centre"
#: Index memory may use at most this share of the memory available now.
MEMORY_SHARE = 0.5
#: faiss warns below 39 training points per centroid.
MIN_POINTS_PER_CENTROID = 39
#: Links per node of an HNSW graph, faiss's usual 32. With one node per sentence the shipped
#: model's copies made islands and M=64 helped; with copies folded (fold.py), M=32 answers a
#: hybrid query as fast as M=64 and builds faster (docs/benchmarks.md, "Query latency").
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
#: nprobe values the tuning walks up through (smallest first, recall.tune_search): steps of
#: ~1.5x, so the value found is at most ~1.5x the cheapest that reaches the target.
NPROBE_STEPS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024,
                1536, 2048)

# The cost model auto picks by, measured with benchmarks/index_candidates.py on 1M vectors of
# the shipped model (docs/speed.md, "Index candidates on the same vectors"). CPU seconds, which
# a loaded machine does not inflate.
#: Vector search alone may cost this much CPU per query: a hybrid query runs its BM25 leg in a
#: second thread beside encoding and vector search, and a vector leg within this, with the
#: rest of the path (encoding, fusion, the SQLite fetch), keeps the query's longer thread under
#: the 5 ms end-to-end target (docs/speed.md, "What auto picks, and why").
QUERY_BUDGET_MS = 3.5
#: Share of an inverted file's codes that a query scans at the recall target with ≈ √n lists
#: (8-bit codes; fp32 vectors need fewer probes but scan 4x the bytes).
IVF_PROBED_SHARE = 0.125
#: CPU nanoseconds per code byte scanned by a lone query (8-bit codes, one thread).
IVF_SCAN_NS_PER_BYTE = 0.093
#: CPU seconds per million vectors per dimension to build (k-means, add and recall tuning):
#: an inverted file of 8-bit codes and an HNSW graph (M=32, efConstruction 40).
IVF_BUILD_S = 22.0 / 256
HNSW_BUILD_S = 450.0 / 256


def ivf_query_ms(n: int, dim: int) -> float:
    """Estimated CPU ms of one query's scan of an 8-bit-code inverted file at the recall
    target."""
    return n * IVF_PROBED_SHARE * dim * IVF_SCAN_NS_PER_BYTE / 1e6


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

    autofaiss starts at 4·√n, but k-means costs O(points · nlist · d · iterations), so 4·√n
    lists would take four times as long to train. With √n lists a query at nprobe 32 still
    scans only 32/√n of the codes (~3% at 1M)."""
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

    def ivf(why: str) -> IndexChoice:
        nlist = ivf_lists(n)
        # 64 points per list for k-means (faiss asks ≥ 39; its IVF training for inner product
        # is spherical, 10 iterations); fp32 vectors when 8-bit codes miss the target
        return IndexChoice("ivf", f"IVF{nlist},SQ8", why, sq8_bytes + nlist * dim * 4,
                           tune="nprobe",
                           candidates=[p for p in NPROBE_STEPS if p <= min(nlist, GPU_MAX_K)],
                           fallback_key=f"IVF{nlist},Flat", train_size=min(n, nlist * 64))

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
    if requested == "ivf":
        return ivf(f"asked for: inverted file of 8-bit codes over {size}, {_gb(sq8_bytes)}; "
                   f"nprobe tuned for recall@10 ≥ {TARGET_RECALL}")
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
    graph, inverted = hnsw(""), ivf("")
    query_ms = ivf_query_ms(n, dim)
    build_s = {"ivf": IVF_BUILD_S * dim * n / 1e6, "hnsw": HNSW_BUILD_S * dim * n / 1e6}
    costs = (f"estimated build ~{build_s['ivf']:,.0f} CPU-s as an inverted file, "
             f"~{build_s['hnsw']:,.0f} as an HNSW graph; an inverted file's query scans "
             f"~{query_ms:.1f} CPU-ms (budget {QUERY_BUDGET_MS:g})")
    if inverted.bytes_estimate <= budget and (query_ms <= QUERY_BUDGET_MS
                                               or graph.bytes_estimate > budget):
        reason = (f"builds ~{build_s['hnsw'] / build_s['ivf']:.0f}x faster within the query "
                  f"budget" if query_ms <= QUERY_BUDGET_MS else
                  f"fits where the graph's {_gb(graph.bytes_estimate)} would not")
        inverted.why = (f"{size} ≥ {SQ8_MAX:,}: {costs}; the inverted file ({inverted.key}, "
                        f"{_gb(inverted.bytes_estimate)}; {avail}) {reason}; nprobe tuned for "
                        f"recall@10 ≥ {TARGET_RECALL}")
        return inverted
    if graph.bytes_estimate <= budget:
        graph.why = (f"{size} ≥ {SQ8_MAX:,}: {costs}, over budget, so an HNSW graph "
                     f"(M={HNSW_M}, {_gb(graph.bytes_estimate)}; {avail}) that answers in "
                     f"well under a millisecond; efSearch tuned for recall@10 ≥ "
                     f"{TARGET_RECALL}")
        return graph
    # Refine codes (fp16) would take more than the 8-bit codes that did not fit: PQ alone.
    small = ivf_pq("", refine=False)
    small.why = (f"{size}: {inverted.key} would need {_gb(inverted.bytes_estimate)}, over the "
                 f"memory budget ({avail}); PQ codes alone take {_gb(small.bytes_estimate)} "
                 f"(lower recall)")
    return small
