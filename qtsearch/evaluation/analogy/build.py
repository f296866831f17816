"""Build the sentence-analogy tuples (A, B, C, D) from the Yelp sentences, deterministically.

Word task: two mined sentence pairs (A, B) and (C, D) of the same category and different word
pairs make a tuple. Tuples are dealt round-robin over the word-pair combinations of a category,
each word pair in at most `cap_per_pair` tuples and each sentence pair in at most one, so that
no single pair (was → is is by far the most frequent) dominates.

Sentiment task (the paper's future-work note): two of Li et al.'s (negative, positive) human
rewrite pairs make a tuple, matched at random with a fixed seed.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from qtsearch.core.config import write_json_atomic
from qtsearch.core.errors import InputError, OutputError
from qtsearch.core.paths import PACKAGE, data_root
from qtsearch.evaluation.analogy.categories import WordPair, WordPairs, load_word_pairs
from qtsearch.evaluation.analogy.data import load_rewrites, load_yelp
from qtsearch.evaluation.analogy.mining import SentencePair, mine_pairs

#: Package data (a small derived artefact, committed; `qtsearch bench analogy build` remakes it),
#: so `bench analogy run` needs only the Yelp sentences of the data folder, not a checkout.
DEFAULT_TUPLES = Path(__file__).resolve().parent / "tuples" / "yelp_tuples.jsonl"
SENTIMENT = "sentiment"
#: The four questions of a tuple (A, B, C, D) as index orders (a, b, c, d), asking a:b::c:?=d:
#: A:B::C:D, B:A::D:C, C:D::A:B, D:C::B:A.
QUESTIONS = ((0, 1, 2, 3), (1, 0, 3, 2), (2, 3, 0, 1), (3, 2, 1, 0))


@dataclass
class BuildConfig:
    data: str | None = None  # the data folder (None: qtsearch.core.paths.data_root's default)
    out: str = str(DEFAULT_TUPLES)
    cap_per_pair: int = 40  # tuples per word pair at most
    min_shared: int = 3  # words two paired sentences must share besides the analogy words
    seed: int = 0
    sentiment: bool = True


@dataclass
class AnalogyTuple:
    """Four sentences A:B::C:D; `pairs` are the word pairs (w1, w2) of (A, B) and (C, D)."""

    id: str
    task: str  # "word" | "sentiment"
    category: str
    source: str  # "google" | "msr" | "li2018"
    sentences: list[str]
    pairs: list[list[str]] = field(default_factory=list)
    extra: list[int] = field(default_factory=list)  # further token differences of each pair


@dataclass
class BuildResult:
    tuples: list[AnalogyTuple]
    sentence_pairs: int  # mined sentence pairs (all categories)
    word_pairs: int  # word pairs with at least one sentence pair

    def counts(self) -> dict[str, dict[str, int]]:
        """Per category: tuples, questions, word pairs used."""
        out: dict[str, dict[str, int]] = {}
        for t in self.tuples:
            row = out.setdefault(t.category, {"tuples": 0, "questions": 0, "word_pairs": 0})
            row["tuples"] += 1
            row["questions"] += 4
        for cat, row in out.items():
            used = {tuple(p) for t in self.tuples if t.category == cat for p in t.pairs}
            row["word_pairs"] = len(used)
        return dict(sorted(out.items()))


def _queue(pairs: list[SentencePair], rng: random.Random) -> list[SentencePair]:
    """A word pair's sentence pairs in the order tuples take them: exact pairs before those with
    a further difference, shuffled, and pairs with not-yet-seen sentences first (variety)."""
    ordered = []
    for extra in (0, 1):
        group = [p for p in pairs if p.extra == extra]
        rng.shuffle(group)
        ordered += group
    seen: set[int] = set()
    fresh, rest = [], []
    for p in ordered:
        if p.first in seen or p.second in seen:
            rest.append(p)
        else:
            fresh.append(p)
            seen.update((p.first, p.second))
    return fresh + rest


def word_tuples(
    sentences: list[str],
    pairs: Iterable[SentencePair],
    word_pairs: WordPairs,
    cap_per_pair: int,
    seed: int,
) -> list[AnalogyTuple]:
    """Tuples for every category, dealt round-robin over its word-pair combinations."""
    by_cat: dict[str, dict[WordPair, list[SentencePair]]] = defaultdict(lambda: defaultdict(list))
    for p in pairs:
        by_cat[word_pairs.category[(p.w1, p.w2)]][(p.w1, p.w2)].append(p)
    out: list[AnalogyTuple] = []
    for cat in sorted(by_cat):
        rng = random.Random(f"{seed}:{cat}")
        queues = {wp: _queue(sorted(ps), rng) for wp, ps in sorted(by_cat[cat].items())}
        combos = list(combinations(sorted(queues), 2))
        rng.shuffle(combos)
        ptr: Counter[WordPair] = Counter()
        uses: Counter[WordPair] = Counter()
        made = 0
        progress = True
        while progress:
            progress = False
            for u, v in combos:
                if uses[u] >= cap_per_pair or uses[v] >= cap_per_pair:
                    continue
                if ptr[u] >= len(queues[u]) or ptr[v] >= len(queues[v]):
                    continue
                p, q = queues[u][ptr[u]], queues[v][ptr[v]]
                if {p.first, p.second} & {q.first, q.second}:
                    ptr[v] += 1  # shares a sentence: try v's next pair in a later round
                    progress = True
                    continue
                ptr[u] += 1
                ptr[v] += 1
                uses[u] += 1
                uses[v] += 1
                made += 1
                progress = True
                out.append(AnalogyTuple(
                    id=f"{cat}-{made:04d}", task="word", category=cat,
                    source=word_pairs.source[u],
                    sentences=[sentences[p.first], sentences[p.second],
                               sentences[q.first], sentences[q.second]],
                    pairs=[list(u), list(v)], extra=[p.extra, q.extra],
                ))
    return out


def sentiment_tuples(rewrites: list[tuple[str, str]], seed: int) -> list[AnalogyTuple]:
    """Consecutive (negative, positive) pairs of a seeded shuffle make the tuples."""
    pairs = sorted(set(rewrites))
    random.Random(f"{seed}:{SENTIMENT}").shuffle(pairs)
    out = []
    for k in range(len(pairs) // 2):
        (a, b), (c, d) = pairs[2 * k], pairs[2 * k + 1]
        if len({a, b, c, d}) < 4:
            continue
        out.append(AnalogyTuple(id=f"{SENTIMENT}-{len(out) + 1:04d}", task=SENTIMENT,
                                category=SENTIMENT, source="li2018", sentences=[a, b, c, d]))
    return out


def build_tuples(config: BuildConfig, progress: Callable[[int], None] | None = None) -> BuildResult:
    """Mine the Yelp sentences and make the tuples (nothing is written)."""
    data = Path(config.data) if config.data else None
    sentences = load_yelp(data)
    word_pairs = load_word_pairs(data_root(data, need="analogy"))
    mined = mine_pairs(sentences, set(word_pairs.category), config.min_shared, progress)
    tuples = word_tuples(sentences, mined, word_pairs, config.cap_per_pair, config.seed)
    if config.sentiment:
        tuples += sentiment_tuples(load_rewrites(data), config.seed)
    return BuildResult(tuples, len(mined), len({(p.w1, p.w2) for p in mined}))


def write_tuples(result: BuildResult, config: BuildConfig) -> Path:
    """JSONL, one tuple a line, and `<name>.config.json` (config and counts) beside it."""
    out = Path(config.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for t in result.tuples:
                fh.write(json.dumps(asdict(t), ensure_ascii=False, sort_keys=True) + "\n")
        tmp.replace(out)
        recorded = asdict(config)
        recorded["out"] = _relative(out)
        write_json_atomic(config_path(out), {
            "config": recorded, "counts": result.counts(),
            "sentence_pairs": result.sentence_pairs, "word_pairs": result.word_pairs,
        })
    except OSError as e:
        raise OutputError(f"{out}: cannot write the tuples ({e.strerror or e})") from e
    return out


def _relative(path: Path) -> str:
    """`path` as `qtsearch/…` when inside the package (the committed config is portable)."""
    try:
        return str(path.resolve().relative_to(PACKAGE.parent))
    except ValueError:
        return str(path)


def config_path(tuples_path: Path) -> Path:
    return tuples_path.with_name(tuples_path.name.removesuffix(".jsonl") + ".config.json")


def read_tuples(path: Path) -> list[AnalogyTuple]:
    """Tuples from a JSONL file written by `write_tuples`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no tuples file (make one with `qtsearch bench analogy build`)")
    out = []
    names = set(AnalogyTuple.__dataclass_fields__)
    try:  # utf-8-sig: a byte-order mark is fine; anything not UTF-8 is not a tuples file
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a tuples file (not UTF-8 text: {e.reason})") from e
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row: dict[str, Any] = json.loads(line)
            t = AnalogyTuple(**{k: v for k, v in row.items() if k in names})
        except (json.JSONDecodeError, TypeError) as e:
            raise InputError(f"{path}:{n}: not an analogy tuple ({e})") from e
        if len(t.sentences) != 4 or not all(isinstance(s, str) and s for s in t.sentences):
            raise InputError(f"{path}:{n}: a tuple needs four non-empty sentences")
        out.append(t)
    if not out:
        raise InputError(f"{path}: no tuples in the file")
    return out
