"""Why a hit ranks where it does, and the notes on answers that are empty or weak.

The engine keeps, for each query, how its hits were ranked (`Basis`: which legs, each leg's
own order, the fusion and its weight, and the mean and spread the convex fusion normalised each
leg by). `Explainer` turns that into one explanation per hit: each leg's score and rank, its
z-score and its part of the fused score (the parts add up to the fused score), where word
alignment re-scored the first hits the first stage's score and the alignment with theirs,
the query's stemmed terms the hit holds (the BM25 analyzer run on the query and on the hit's
text), the query's composed words, whether the hit's cosine is under the model's weak-match
threshold, and whether the hit is a fragment ranked below the sentences
(qtsearch.search.hits.is_fragment).

A fused score is only comparable within one query (docs/scores.md); a cosine is comparable
across queries of one model and index, which is what the weak-match threshold rests on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from qtsearch.encoders.files import DEFAULT_MODEL
from qtsearch.search.alignment import explained
from qtsearch.search.fusion import RRF_K, Leg, SearchSettings, spread, z_scores
from qtsearch.search.hits import Basis, Hit, LegBasis, Results, is_fragment
from qtsearch.search.lexical import LexicalSearch, stop_words_note
from qtsearch.search.words import composed_words
from qtsearch.text.terms import Analyzer

#: The shipped model's weak-match threshold on the semantic cosine: a hit under it is weak,
#: and a query whose every candidate is under it has no good match. Measured on the STS-B
#: dev pairs in the space of an index built by `qtsearch demo` (centred, as the model's folder
#: asks): nearly all paraphrase pairs reach it, few random or unrelated pairs do
#: (docs/scores.md, "The weak-match threshold").
#: Another model sets its own as "weak_cosine" in its config's "search" block; one without
#: it gets no weak-match signal, since a cosine scale is the model's own.
WEAK_COSINE = 0.40


def weak_cosine(encoder: object) -> float | None:
    """The weak-match threshold of `encoder`: its folder's own, WEAK_COSINE for the shipped
    model, else None (not calibrated)."""
    own = (getattr(encoder, "search", None) or {}).get("weak_cosine")
    if own is not None:
        return float(own)
    path = getattr(encoder, "path", None)
    shipped = path is not None and Path(path).resolve() == DEFAULT_MODEL
    return WEAK_COSINE if shipped else None


def basis_of(shown: Mapping[str, Leg], raw: Mapping[str, Leg | None],
             settings: SearchSettings) -> Basis:
    """The Basis of one query from the per-leg scores shown with its hits (`shown`: over
    every fused candidate), each leg as it came back (`raw`: its own order) and the settings
    the search ran with."""
    legs = {}
    for name, scores in shown.items():
        values = np.array(list(scores.values()), dtype=np.float64)
        own = raw.get(name) or scores
        legs[name] = LegBasis({i: r for r, i in enumerate(own, 1)}, *spread(values))
    fused = len(legs) == 2
    return Basis(legs, settings.fusion if fused else None,
                 settings.lexical_weight if fused else None)


def no_match_note(text: str, mode: str, filtered: bool) -> str:
    """The line for a query with no hit at all."""
    why = ("none of its words (stop-words aside) occurs in the index" if mode == "lexical"
           else "no stored sentence is a candidate")
    return f"no match for {text!r}: {why}{' under the filters' if filtered else ''}"


def weak_note(text: str, hits: list[Hit], threshold: float | None) -> str | None:
    """The line for a query whose every hit has a semantic cosine under `threshold`."""
    cosines = [h.legs["semantic"] for h in hits if h.legs and "semantic" in h.legs]
    if threshold is None or not cosines or max(cosines) >= threshold:
        return None
    return (f"no good match for {text!r}: the best cosine is {max(cosines):.2f}, under this "
            f"model's weak-match threshold {threshold:.2f}")


@dataclass(frozen=True)
class Asked:
    """A search's queries as the engine answers them: their texts, the notes found before
    searching (None: none), how each was ranked, and whether filters applied."""

    texts: list[str]
    notes: list[str | None]
    bases: list[Basis]
    filtered: bool

    def note(self, n: int, hits: list[Hit], threshold: float | None) -> str | None:
        """Query n's note: on an empty answer no_match_note, followed by the one found before
        searching (not the stop-word one, which speaks of hits); else the one found before
        searching, else weak_note's."""
        text, mode, before = self.texts[n], self.bases[n].mode, self.notes[n]
        if not hits:
            empty = no_match_note(text, mode, self.filtered)
            keep = before is not None and before != stop_words_note(text, mode)
            return f"{empty}; {before}" if keep else empty
        return before or weak_note(text, hits, threshold)


class Opened(Protocol):
    """What an explanation needs of an opened index (qtsearch.search.searcher.Searcher, which
    imports this module)."""

    lexical: LexicalSearch | None
    encoder: Any
    weak_cosine: float | None


class Explainer:
    """Explanations of the hits of one opened index (`Explainer(index).explain(query,
    hits)`): JSON-ready dicts, one a hit, in order."""

    def __init__(self, index: Opened):
        lexical = index.lexical
        bm25 = lexical.bm25 if lexical is not None else None
        self.analyzer = bm25.analyzer if bm25 is not None else Analyzer()
        self.encoder = index.encoder
        self.weak = index.weak_cosine

    def explain(self, query: str | int, hits: Results) -> list[dict[str, Any]]:
        text = query if isinstance(query, str) else None  # an id: its neighbours, no words
        terms = list(dict.fromkeys(self.analyzer.terms(text))) if text else []
        composed = composed_words(self.encoder, text) if text else []
        basis = getattr(hits, "basis", None)
        shared: dict[str, Any] = {"query_terms": terms, "composed": composed,
                                  "weak_below": self.weak}
        if getattr(hits, "rerank_weight", None) is not None:
            shared["rerank_weight"] = hits.rerank_weight
        return [{**self._scores(h, basis), **self._words(h, terms), **shared} for h in hits]

    def _words(self, hit: Hit, terms: list[str]) -> dict[str, Any]:
        held = set(self.analyzer.terms(hit.text)) if terms else set()
        cosine = (hit.legs or {}).get("semantic")
        weak = self.weak is not None and cosine is not None and cosine < self.weak
        return {"matched": [t for t in terms if t in held], "weak": weak,
                "fragment": is_fragment(hit.text)}

    @staticmethod
    def _scores(hit: Hit, basis: Basis | None) -> dict[str, Any]:
        """Each leg's score, rank (None: not among the leg's own candidates, its score filled
        in) and, fused, its part of the fused score: weight · z (convex) or 1 / (60 + rank)
        (rrf); re-scored by word alignment, `aligned`: the first stage's score and the
        alignment, each with its z and part of the score (qtsearch.search.alignment.explained).
        Without a basis (re-ranked hits), the legs' scores only."""
        scores = dict(hit.legs or {})
        if basis is None:
            return {"mode": "rerank" if "rerank" in scores else None, "fusion": None,
                    "lexical_weight": None, "score": hit.score,
                    "legs": {n: {"score": s} for n, s in scores.items()}}
        legs: dict[str, dict[str, Any]] = {}
        w = basis.lexical_weight
        for name, leg in basis.legs.items():
            rank = leg.order.get(hit.id)
            shown: dict[str, Any] = {"score": scores.get(name), "rank": rank}
            if basis.fusion == "convex" and w is not None and name in scores:
                z = float(z_scores(scores[name], leg.mean, leg.std))
                share = w if name == "lexical" else 1.0 - w
                shown |= {"mean": leg.mean, "std": leg.std, "z": z, "part": share * z}
            elif basis.fusion == "rrf":
                shown["part"] = 1.0 / (RRF_K + rank) if rank is not None else 0.0
            legs[name] = shown
        out = {"mode": basis.mode, "fusion": basis.fusion, "lexical_weight": w,
               "score": hit.score, "legs": legs}
        return out | {"aligned": explained(basis.aligned, scores)} if basis.aligned else out
