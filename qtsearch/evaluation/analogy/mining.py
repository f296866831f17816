"""Mine sentence pairs that differ by one analogy word pair (w1 → w2), as Guu et al. 2017 did.

Two sentences make a pair when, after dropping punctuation tokens (`!` vs `! ! !` is no
difference), their word sequences differ by the substitution w1 → w2 at one aligned position
plus at most one further token (substituted, inserted or deleted), and they share at least
`min_shared` other words.

Search is by hashing, never all pairs: each occurrence of an analogy word in a sentence gives
its word sequence with that position wildcarded (the exact key) and, for every other position,
the same with that token deleted (deletion keys). Two sequences within one edit of each other
(besides the wildcard) always share a key (SymSpell's symmetric-deletion idea); candidates are
then checked exactly, so a hash collision can never let a wrong pair through.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qtsearch.evaluation.analogy.categories import WordPair

WILDCARD = "\x00"


@dataclass(frozen=True, order=True)
class SentencePair:
    """Sentences `first` (with w1) and `second` (with w2), as indexes into the mined list."""

    w1: str
    w2: str
    first: int
    second: int
    extra: int  # further content-token differences besides w1 → w2: 0 or 1


def is_punct(token: str) -> bool:
    return not any(ch.isalnum() for ch in token)


def content(sentence: str) -> list[str]:
    """The sentence's tokens without punctuation."""
    return [t for t in sentence.split() if not is_punct(t)]


def within_one_edit(a: list[str], b: list[str]) -> int | None:
    """Edit distance of a and b if it is 0 or 1, else None (linear time)."""
    if a == b:
        return 0
    if abs(len(a) - len(b)) > 1:
        return None
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    if len(a) == len(b):
        return 1 if a[i + 1 :] == b[i + 1 :] else None
    longer, shorter = (a, b) if len(a) > len(b) else (b, a)
    return 1 if longer[i + 1 :] == shorter[i:] else None


def _keys(tokens: list[str], pos: int, min_shared: int) -> list[int]:
    """Hashes of the exact key and deletion keys of `tokens` wildcarded at `pos`."""
    base = [*tokens[:pos], WILDCARD, *tokens[pos + 1 :]]
    keys = [hash(tuple(base))] if len(base) - 1 >= min_shared else []
    if len(base) - 2 >= min_shared:
        keys += [hash(tuple(base[:j] + base[j + 1 :])) for j in range(len(base)) if j != pos]
    return keys


def mine_pairs(
    sentences: list[str],
    word_pairs: set[WordPair],
    min_shared: int = 3,
    progress: Callable[[int], None] | None = None,
) -> list[SentencePair]:
    """All sentence pairs (sorted) differing by one pair of `word_pairs` (+ ≤ 1 further token)."""
    partners: dict[str, set[str]] = defaultdict(set)
    for w1, w2 in word_pairs:
        partners[w1].add(w2)
    words = {w for p in word_pairs for w in p}
    toks = [content(s) for s in sentences]
    key_list: list[int] = []
    owner: list[int] = []  # index into occ
    occ: list[tuple[int, int]] = []  # (sentence, position of the analogy word)
    for i, tokens in enumerate(toks):
        for pos, tok in enumerate(tokens):
            if tok in words:
                keys = _keys(tokens, pos, min_shared)
                key_list += keys
                owner += [len(occ)] * len(keys)
                occ.append((i, pos))
        if progress and i % 10_000 == 9_999:
            progress(10_000)
    if progress:
        progress(len(toks) % 10_000)
    keys_arr = np.array(key_list, dtype=np.int64)
    owners = np.array(owner, dtype=np.int64)
    order = np.argsort(keys_arr, kind="stable")
    keys_arr, owners = keys_arr[order], owners[order]
    bounds = np.flatnonzero(np.diff(keys_arr)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(keys_arr)]])
    found: dict[tuple[int, int, str, str], int] = {}
    for s, e in zip(starts[ends - starts > 1], ends[ends - starts > 1], strict=True):
        by_word: dict[str, list[int]] = defaultdict(list)
        for o in set(owners[s:e].tolist()):
            i, pos = occ[o]
            by_word[toks[i][pos]].append(o)
        for w1, group in by_word.items():
            for w2 in partners.get(w1, ()):
                for o1 in group:
                    for o2 in by_word.get(w2, ()):
                        _check(toks, occ[o1], occ[o2], w1, w2, min_shared, found)
    return sorted(SentencePair(w1, w2, i, j, x) for (i, j, w1, w2), x in found.items())


def _check(
    toks: list[list[str]],
    a: tuple[int, int],
    b: tuple[int, int],
    w1: str,
    w2: str,
    min_shared: int,
    found: dict[tuple[int, int, str, str], int],
) -> None:
    """Record (a, b) when their wildcarded word sequences are within one edit of each other.

    Each sequence holds exactly one wildcard, so an alignment within one edit always puts the
    two wildcards (w1 and w2) on each other.
    """
    (i, p), (j, q) = a, b
    if i == j:
        return
    x = [*toks[i][:p], WILDCARD, *toks[i][p + 1 :]]
    y = [*toks[j][:q], WILDCARD, *toks[j][q + 1 :]]
    extra = within_one_edit(x, y)
    if extra is None or max(len(x), len(y)) - 1 - extra < min_shared:
        return
    key = (i, j, w1, w2)
    found[key] = min(extra, found.get(key, extra))
