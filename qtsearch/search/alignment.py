"""Word alignment: the first hits looked at again, word by word, with the model's own words.

A mean of word vectors loses which words met which: "He won the Nobel Prize in Physics." and
"Loewi won the Nobel Prize for his discovery." are close vectors, though "Physics" has no
partner in the second. Once the first stage (hybrid or semantic) has ranked its candidates,
each of the first `depth` hits is scored by how well the query's words find a partner among
the hit's words: for every query word its best cosine with a word of the hit, averaged with
the query word's vector length as its weight (the trained table gives "the" a length near 1
and "telephone" near 7, so the words that carry a query count most). The same word in both
scores 1, a related one its cosine: late interaction, as in ColBERT, over the static table the
index already uses, so it needs no other model and costs a small matrix product a query.

A hit's score is then `(1 - weight) · z(first stage) + weight · z(alignment)`, each z over the
re-scored hits; a hit past them keeps its place, its alignment taken as the lowest among
them. Measured on SQuAD's development answers, the
paraphrase sets and BEIR's development splits (docs/retrieval.md, "Word alignment").
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from qtsearch.core.blas import ONE_BLAS_THREAD
from qtsearch.search.fusion import Leg, spread, z_scores
from qtsearch.search.hits import Aligned, Basis

#: Rows whose token ids an opened index keeps for word alignment, the most recently read (an
#: int32 array each; its memory when full: docs/speed.md, "What word alignment costs a
#: query").
ROWS_KEPT = 50_000


class WordRows(Protocol):
    """An encoder whose words have rows of their own (the mean-of-words model): for some texts
    (`word_rows`) or their token ids (`id_rows`), the rows of their distinct words, which row
    each token is (text after text) and each text's number of tokens."""

    def token_ids(self, sentence: str) -> list[int]: ...

    def word_rows(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def id_rows(self, ids: Sequence[Sequence[int]]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


class RowTokens:
    """The token ids of the stored rows word alignment has read, the last `size` of them kept:
    tokenising 30 texts was most of what alignment cost a query, and a server's queries meet
    the same hits again and again. One per opened index, whose rows and composed words' ids
    do not change while it is open (an add or delete opens the index anew). Safe from many
    threads."""

    def __init__(self, encoder: WordRows, size: int = ROWS_KEPT):
        self._token_ids = encoder.token_ids
        self._size = size
        self._kept: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def of(self, ids: Sequence[int], texts: Callable[[list[int]], Mapping[int, str]]
           ) -> list[np.ndarray]:
        """The token ids of each row of `ids`, those not kept tokenised from `texts(missing)`
        (a row the store lacks: its text taken as empty, and not kept)."""
        found: dict[int, np.ndarray] = {}
        with self._lock:
            for i in ids:
                row = self._kept.get(i)
                if row is not None:
                    self._kept.move_to_end(i)
                    found[i] = row
        missing = [i for i in ids if i not in found]
        if missing:
            stored = texts(missing)
            new = {i: np.asarray(self._token_ids(stored.get(i, "")), dtype=np.int32)
                   for i in missing}
            found.update(new)
            with self._lock:
                self._kept.update((i, row) for i, row in new.items() if i in stored)
                while len(self._kept) > self._size:
                    self._kept.popitem(last=False)
        return [found[i] for i in ids]


def aligns(encoder: object) -> bool:
    """Whether `encoder` can align words (it has a word table: WordRows)."""
    return all(callable(getattr(encoder, name, None))
               for name in ("token_ids", "word_rows", "id_rows"))


def alignment(query: np.ndarray, words: np.ndarray, positions: np.ndarray,
              lengths: np.ndarray) -> np.ndarray:
    """Each hit's alignment with the query, from the rows of the query's words (one a token)
    and the hits' (`words`: distinct rows; `positions`: the row of each token, hit after hit;
    `lengths`: tokens a hit, one with none scoring 0): Σ_q |q| · max_h cos(q, h) / Σ_q |q|
    over the query's words q and the hit's words h."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(len(lengths), dtype=np.float64)
    norms = np.linalg.norm(query, axis=1) if len(query) else np.zeros(0)
    kept = lengths > 0
    if norms.sum() <= 1e-12 or not kept.any():
        return out
    unit = np.ascontiguousarray((query / np.maximum(norms, 1e-12)[:, None]).T,
                                dtype=np.float32)
    words = np.asarray(words, dtype=np.float32)
    lengths_of = np.sqrt(np.einsum("ij,ij->i", words, words))
    # words x query, not query x words: numpy's product of a tall matrix by a small
    # contiguous one is several times faster at these sizes (~250 x 256 by 256 x 12)
    with ONE_BLAS_THREAD:
        cosines = (words @ unit) / np.maximum(lengths_of, 1e-12)[:, None]
    starts = (np.cumsum(lengths) - lengths)[kept]
    best = np.maximum.reduceat(cosines[positions], starts, axis=0)
    out[kept] = best @ norms / norms.sum()
    return out


def realign(query: str, order: Leg, legs: Mapping[str, Leg], depth: int, weight: float,
            encoder: WordRows, tokens: Callable[[list[int]], list[np.ndarray]]
            ) -> tuple[Leg, dict[str, Leg], Aligned]:
    """A ranking (`order`, best first) re-scored: its first `depth` ids aligned with the query
    (`tokens(ids)`: the token ids of the stored rows ids), each id's score
    `(1 - weight) · z(first stage) + weight · z(alignment)`, both z by the mean and spread
    over those `depth`; an id past them takes the lowest alignment among them (filled in, as
    a fused leg's missing score is), so a deeper fetch costs nothing more and keeps its order.
    Best first, with the per-leg scores plus the first stage's (`first`) and the alignments
    computed (`alignment`)."""
    ids = list(order)
    head = ids[:depth]
    if not head:
        return order, dict(legs), Aligned(weight, (0.0, 0.0), (0.0, 0.0), 0.0)
    first = np.array([order[i] for i in ids], dtype=np.float64)
    rows, positions, _ = encoder.word_rows([query])
    aligned = alignment(rows[positions], *encoder.id_rows(tokens(head)))
    stage = Aligned(weight, spread(first[: len(head)]), spread(aligned),
                    float(aligned.min()))
    words = np.concatenate([aligned, np.full(len(ids) - len(head), stage.floor)])
    mixed = ((1.0 - weight) * z_scores(first, *stage.first)
             + weight * z_scores(words, *stage.words))
    new = {ids[j]: float(mixed[j]) for j in np.argsort(-mixed, kind="stable")}
    shown: dict[str, Leg] = {**legs, "first": dict(zip(ids, first.tolist(), strict=True)),
                             "alignment": dict(zip(head, aligned.tolist(), strict=True))}
    return new, shown, stage


def realign_all(queries: Sequence[str], ranked: list[tuple[Leg, dict[str, Leg]]],
                bases: list[Basis], rows: Iterable[int], depth: int, weight: float,
                encoder: WordRows, kept: RowTokens,
                get: Callable[[list[int]], dict[int, dict[str, Any]]]
                ) -> dict[int, dict[str, Any]]:
    """`realign` the ranking and basis of each query in `rows` in place; `kept`: the index's
    rows' token ids, `get(ids)`: stored rows by id, read for the rows `kept` lacks. The rows
    it read, by id (the hits need them next)."""
    fetched: dict[int, dict[str, Any]] = {}

    def texts(ids: list[int]) -> dict[int, str]:
        fetched.update(get([i for i in ids if i not in fetched]))
        return {i: fetched[i]["text"] for i in ids if i in fetched}

    def tokens(ids: list[int]) -> list[np.ndarray]:
        return kept.of(ids, texts)

    for row in rows:
        order, legs, aligned = realign(queries[row], *ranked[row], depth, weight, encoder,
                                       tokens)
        ranked[row], bases[row] = (order, legs), replace(bases[row], aligned=aligned)
    return fetched


def explained(aligned: Aligned, legs: Mapping[str, float]) -> dict[str, Any]:
    """One hit's part of the alignment stage: the first stage's score and the alignment (the
    lowest of the re-scored hits', `filled`, for a hit past them), each with its z and its part
    of the hit's score (the two parts add up to the score)."""
    out: dict[str, Any] = {"alignment_weight": aligned.weight}
    for name, mean_std, share in (("first", aligned.first, 1.0 - aligned.weight),
                                  ("alignment", aligned.words, aligned.weight)):
        value = legs.get(name)
        filled = value is None and name == "alignment"
        value = aligned.floor if filled else value
        z = float(z_scores(value, *mean_std)) if value is not None else 0.0
        out[name] = {"score": value, "z": z, "part": share * z} | (
            {"filled": True} if filled else {})
    return out
