"""The lexical leg: exact BM25 over the index's BM25 files, or the FTS5 table of an index
built before them.

An index with BM25 files (qtsearch.index.bm25: an inverted file of numpy arrays) is searched
there: the OR of every query word that is not an English stop-word, every matching row scored,
ranked as BM25 by its definition ranks. Filters stay exact: the rows a `where` clause matches
are looked up and the others dropped before the top k are taken. A query none of whose other
words occurs in the index matches nothing: what its stop-words alone would find shares only
function words with it ("bad weather on holiday" → "Meeting with the plumber on Tuesday"), so
hybrid search ranks it by meaning alone and lexical search says why it has no hit. Such an
index has no FTS5 table: serving those queries was the table's only use, and filling it was
half of the build's metadata stage (docs/lexical.md, "Where it lives").

An index built before the BM25 files is searched over its FTS5 table, where any text is a valid
query: it is cut into words, each word is quoted as an FTS5 string (so no character is ever
query syntax) and the words are OR-ed. FTS5 scores every row that matches, and "the" alone
matches half of all sentences (docs/searching.md, "Hybrid search: how the legs are fused
(measured)"). So words are taken rarest first while the rows they match stay within a budget
(600); frequent words (stop-words in any language) drop out when the query has rarer ones, and
they add little to BM25 anyway (their IDF is near zero). A query of frequent words only is
searched as all of them AND-ed, and if even that matches too many rows, the first rows are
scored. Word frequencies are counted up to the budget (a bounded-cost test) and cached;
`learn_counts` (run by the index's warm-up thread) counts every term of the index in one pass,
and a query word is then counted by its stem, found by the same tokenizer in memory. The stem
matters: the index holds "nothing" as the stem of "nothingness" (a few rows) while the word
"nothing" is searched as "noth" (thousands), so counts keyed by the word itself would plan warm
and cold queries differently. The table stems with Porter ("danced" finds "dance").
"""

from __future__ import annotations

import functools
import logging
import math
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from qtsearch.index.bm25 import Bm25Index
from qtsearch.index.schema import FTS_TOKENIZE, fts_phrase
from qtsearch.index.store import MetadataStore
from qtsearch.text.terms import WORD

log = logging.getLogger("qtsearch")
#: Rows BM25 may score for one query: few enough that the leg costs less than the semantic
#: leg takes to encode and search beside it, enough that doubling it did not change hybrid
#: MRR@10 on the paraphrase tasks.
ROW_BUDGET = 600
#: Words whose counts are remembered (a few MB at most).
CACHE_WORDS = 100_000
#: Pseudo-relevance feedback for the lexical leg (RM3; `expanded`): the first rows whose terms
#: expand a query, and how many of their terms it takes. Chosen with the share of the weight
#: (qtsearch.search.fusion.LEXICAL_FEEDBACK) on SciFact train and NFCorpus dev
#: (docs/retrieval.md, "Lexical feedback over passages").
FEEDBACK_ROWS = 3
FEEDBACK_TERMS = 10


def expanded(ids: list[int], first: list[tuple[str, float]], bm25: Bm25Index,
             share: float) -> dict[int, float]:
    """Term id -> weight of a query of terms `ids` expanded by its first hits (`first`: text,
    BM25), as RM3 expands it: each hit weighs exp(its score − the best's), a term its share of
    the hit's terms, and the FEEDBACK_TERMS likeliest terms over the hits (the query's own
    among them) share `share` of the query's weight, len(ids) in all; each query term keeps
    1 − `share` of its own. A row's score is then its BM25 under these weights."""
    if not first:
        return dict.fromkeys(ids, 1.0)
    weights = dict.fromkeys(ids, 1.0 - share)
    best = max(score for _, score in first)
    likely: dict[str, float] = {}
    for text, score in first:
        terms = bm25.analyzer.terms(text)
        weight = math.exp(score - best)
        for term in terms:
            likely[term] = likely.get(term, 0.0) + weight / len(terms)
    top = sorted(likely.items(), key=lambda kv: (-kv[1], kv[0]))[:FEEDBACK_TERMS]
    mass = sum(p for _, p in top)
    for term, p in top:
        term_id = bm25.term_id(term)
        if term_id is not None:
            weights[term_id] = weights.get(term_id, 0.0) + share * len(ids) * p / mass
    return weights



def query_words(text: str) -> list[str]:
    """The distinct words of a query, lower-cased, in order (FTS5's tokenizer folds case and
    diacritics and stems itself; letters and digits make words, everything else separates)."""
    seen: dict[str, None] = {}
    for w in WORD.findall(text):
        seen.setdefault(w.casefold(), None)
    return list(seen)


def stop_words_note(text: str, mode: str) -> str:
    """The line for a query whose only words in the index are stop-words: hybrid search
    leaves its lexical leg out, lexical search says what its hits have in common."""
    what = ("ranked by meaning alone" if mode == "hybrid"
            else "its hits share only such words with it")
    return f"no word of {text!r} but stop-words occurs in the index: {what}"


class Stems:
    """The term FTS5 searches for a word (its Porter stem, folded), from the index's own
    tokenizer run on an in-memory table: no second stemmer that could disagree with it."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"CREATE VIRTUAL TABLE words USING fts5(w, tokenize='{FTS_TOKENIZE}')")
        self._db.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(words, instance)")
        self._known: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def of(self, words: list[str]) -> dict[str, str | None]:
        """The single term each word is searched as; None where a word makes several terms or
        none ("dan’s" is the phrase "dan s"): such a word is counted by a lookup instead. The
        words not seen before go through the tokenizer in one pass (one at a time, a query's
        new words cost as much as its BM25: docs/benchmarks.md, "Query latency")."""
        with self._lock:
            new = [w for w in dict.fromkeys(words) if w not in self._known]
            if new:
                if len(self._known) + len(new) > CACHE_WORDS:
                    self._known.clear()
                terms = self._tokenize(new)
                for row, word in enumerate(new):
                    found = terms.get(row, [])
                    self._known[word] = found[0] if len(found) == 1 and found[0] else None
            return {w: self._known.get(w) for w in words}

    def _tokenize(self, words: list[str]) -> dict[int, list[str]]:
        """The terms of each word (by its position), in a transaction rolled back whatever
        happens: the table is shared by every request of a server, so a query that fails here
        must leave it empty for the next one. A term that is not valid UTF-8 (the tokenizer
        cuts a very long word inside a character) is given as "": no single term."""
        terms: dict[int, list[str]] = {}
        try:
            self._db.executemany("INSERT INTO words(rowid, w) VALUES (?, ?)", enumerate(words))
            for term, row in self._db.execute("SELECT CAST(term AS BLOB), doc FROM terms"):
                try:
                    text = bytes(term).decode("utf-8")
                except UnicodeDecodeError:
                    text = ""
                terms.setdefault(row, []).append(text)
        finally:
            self._db.rollback()
        return terms


class LexicalSearch:
    """BM25 search of one index: its BM25 files beside the store where the index has them,
    else the store's full-text table (with the word counts it has looked up)."""

    def __init__(self, store: MetadataStore, budget: int = ROW_BUDGET,
                 rows: int | None = None):
        """`rows`: the store's count of rows where the caller has just counted them (a count
        of a million rows is a scan of the table)."""
        self.store = store
        self.budget = budget
        #: the store's FTS5 table: an index built before the BM25 files has one
        self.fts = store.has_fts()
        # the index folder's BM25 files; None for an index built before them (FTS5 only)
        self.bm25 = Bm25Index.open(Path(store.path).parent)
        if self.bm25 is not None and rows is None:
            rows = store.count()
        if self.bm25 is not None and self.bm25.count != rows:
            # rows added by a qtsearch that did not know the files: they would miss them
            instead = "the full-text table instead" if self.fts else "by meaning alone"
            log.warning("%s: its BM25 files cover %d of %d rows; searching %s (rebuild the "
                        "index to get exact BM25 back)", store.path, self.bm25.count, rows,
                        instead)
            self.bm25 = None
        self._rows: dict[str, int] = {}
        self._learned: dict[str, int] = {}  # every term of the index, once learn_counts ran
        self._lock = threading.Lock()

    @functools.cached_property
    def _stems(self) -> Stems:
        """The stemmer of the full-text table's queries, made when one first needs it: an
        index with BM25 files alone never does, and its open skips the in-memory table."""
        return Stems()

    @classmethod
    def open(cls, db: Path, rows: int | None = None) -> LexicalSearch | None:
        """The lexical leg of the index whose metadata store is `db` (of `rows` rows, where
        known), through a connection of its own (the leg runs in another thread); None when
        the index has neither BM25 files covering its rows nor a full-text table."""
        lexical = cls(MetadataStore.open(db, readonly=True), rows=rows)
        if lexical.bm25 is None and not lexical.fts:
            lexical.store.close()
            return None
        return lexical

    def learn_counts(self, words: Iterable[str] = ()) -> None:
        """Read the BM25 files' term table into the page cache; where the index has a
        full-text table, also count every word of it at once (one pass, through a connection
        of its own: it runs in the warm-up thread) and stem `words` ahead of the queries that
        will use them (docs/benchmarks.md, "Query latency")."""
        if self.bm25 is not None:
            self.bm25.warm()
        if not self.fts:
            return
        with MetadataStore.open(self.store.path) as own:
            counts = own.term_counts()
        self._learned = {w: min(n, self.budget + 1) for w, n in counts.items()}
        self._stems.of(list(dict.fromkeys(q for w in words for q in query_words(w))))

    def rows_of(self, word: str) -> int:
        """Rows holding `word`, exact up to the budget (budget + 1 means "more")."""
        if self._learned:
            term = self._stems.of([word])[word]
            if term is not None:
                return self._learned.get(term, 0)
        with self._lock:
            n = self._rows.get(word)
        if n is None:
            n = self.store.term_rows(word, self.budget + 1)
            with self._lock:
                if len(self._rows) >= CACHE_WORDS:
                    self._rows.clear()
                self._rows[word] = n
        return n

    def plan(self, text: str) -> tuple[str, bool] | None:
        """The FTS5 query for `text` and whether to rank all its matches (False: too many,
        score the first ones); None when no word of it occurs in the index."""
        words = query_words(text)
        if self._learned:
            self._stems.of(words)  # all new words stemmed in one pass; rows_of finds them
        counts = {w: self.rows_of(w) for w in words}
        found = sorted((n, w) for w, n in counts.items() if n > 0)
        if not found:
            return None
        chosen, total = [], 0
        for n, w in found:
            if total + n > self.budget:
                break
            chosen.append(w)
            total += n
        if chosen:
            return " OR ".join(fts_phrase(w) for w in chosen), True
        return " AND ".join(fts_phrase(w) for _, w in found), False

    def stop_words_only(self, text: str) -> bool:
        """Whether no word of `text` but its stop-words occurs in the index (known exactly
        where the index has BM25 files): whatever BM25 then finds shares only function words
        with the query ("bad weather on holiday" → "Meeting with the plumber on Tuesday")."""
        return (self.bm25 is not None and bool(query_words(text))
                and not self.bm25.ids_of(self.bm25.query_terms(text)))

    def search(self, text: str, k: int, clause: str = "", params: Sequence[Any] = (),
               feedback: float = 0.0) -> list[tuple[int, float]]:
        """(id, BM25) of the best `k` rows for `text`, best first (rows matching `clause`).
        `feedback` above 0 (BM25 files only): the query expanded by its first hits' terms,
        that share of its weight on them (`expanded`), the rows ranked by the expanded query."""
        if self.bm25 is not None:
            ids = self.bm25.ids_of(self.bm25.query_terms(text))
            if ids:
                allowed = self.store.ids_where(clause, params) if clause else None
                if feedback <= 0.0:
                    return self.bm25.top_ids(ids, k, allowed)
                first = self.bm25.top_ids(ids, FEEDBACK_ROWS, allowed)
                texts = self.store.get([row for row, _ in first])
                weights = expanded(ids, [(texts[row]["text"], score) for row, score in first
                                         if row in texts], self.bm25, feedback)
                return self.bm25.top_ids(list(weights), k, allowed, list(weights.values()))
            if not self.fts:  # only stop-words can match: no hit rather than noise
                return []
        plan = self.plan(text)
        if plan is None:
            return []
        match, ranked = plan
        if ranked:
            return self.store.bm25(match, k, clause, params)
        return self.store.bm25(match, max(k, self.budget), clause, params, ranked=False)[:k]
