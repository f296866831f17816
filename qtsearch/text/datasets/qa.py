"""Question → answer data: SQuAD v1.1 files (official JSON layout) and MedQuAD (JSON Lines).

SQuAD is split **by article** into training and development articles (`is_dev_article`, a fixed
hash of the title), so no paragraph, sentence or topic of a development article is ever
trained on; `squad_questions` gives either side with every paragraph's sentences, which
`qtsearch bench retrieval` indexes for sentence-level answer retrieval (ReQA, Ahmad et al.
2019) and `qa_pairs` turns into training pairs.

A training pair is (question, the sentence holding its answer), with a near miss as hard
negative: for SQuAD the other sentence of the same paragraph sharing the most content words
with the question (a lexical look-alike that does not answer), for MedQuAD the answer of
another question about the same focus (the symptoms of X asked about, the causes of X given).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qtsearch.core.errors import InputError
from qtsearch.text.datasets.paraphrase_data import Pair, _read_all, read_all_pairs
from qtsearch.text.splitter import split_sentences
from qtsearch.text.stopwords import STOP_WORDS
from qtsearch.text.terms import Analyzer

#: One article in ten (by a hash of its title) is a development article.
DEV_BUCKETS = 10
#: Words of a MedQuAD answer kept as its positive: the answer's opening sentences up to this
#: many words (an answer runs to hundreds of words; its opening says what it is about).
ANSWER_WORDS = 60

SPLITS = ("train", "dev", "all")
#: A MedQuAD answer's section heading ("Key Points - …"): no part of the answer.
_HEADING = re.compile(r"^Key Points\s*-?\s*")


def is_dev_article(title: str) -> bool:
    """Whether a SQuAD article belongs to the development side of the by-article split."""
    return int(hashlib.sha256(title.encode()).hexdigest()[:8], 16) % DEV_BUCKETS == 0


@dataclass(frozen=True)
class SquadQuestion:
    """One question with its paragraph's sentences; `answers` are the answer texts and
    `answer_sentence` the index of the sentence holding the first one."""

    qid: str
    question: str
    answers: tuple[str, ...]
    article: str
    paragraph: int  # running number of the paragraph in the file: the document it belongs to
    sentences: tuple[str, ...]
    answer_sentence: int

    def answered_by(self, sentence: str) -> bool:
        """Whether a sentence holds one of the answers (any occurrence counts, as ReQA)."""
        return any(a in sentence for a in self.answers)


def _sentence_at(spans: list[tuple[int, str]], offset: int, answer: str) -> int | None:
    """The sentence covering `offset` when it holds the answer, else the first that does."""
    starts = [s for s, _ in spans]
    at = max((i for i, s in enumerate(starts) if s <= offset), default=0)
    if answer in spans[at][1]:
        return at
    return next((i for i, (_, s) in enumerate(spans) if answer in s), None)


def _load_json(path: Path) -> Any:
    try:
        return _read_all(path, json.load)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e})") from e


def squad_questions(path: Path, split: str = "train") -> list[SquadQuestion]:
    """The questions of a SQuAD-format file on one side of the by-article split ("all": every
    article); a question whose answer no sentence holds (a span across a sentence break) is
    left out."""
    if split not in SPLITS:
        raise InputError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    data = _load_json(path)
    try:
        articles = data["data"]
        out: list[SquadQuestion] = []
        paragraph = -1
        for article in articles:
            title = str(article["title"])
            keep = split == "all" or is_dev_article(title) == (split == "dev")
            for p in article["paragraphs"]:
                paragraph += 1
                if not keep:
                    continue
                spans = split_sentences(p["context"])
                if not spans:
                    continue
                sentences = tuple(s for _, s in spans)
                for qa in p["qas"]:
                    answers = tuple(dict.fromkeys(str(a["text"]).strip() for a in qa["answers"]))
                    first = qa["answers"][0]
                    at = _sentence_at(spans, int(first["answer_start"]), answers[0])
                    if at is None:
                        continue
                    out.append(SquadQuestion(str(qa["id"]), " ".join(str(qa["question"]).split()),
                                             answers, title, paragraph, sentences, at))
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise InputError(f"{path}: not a SQuAD file ({type(e).__name__}: {e})") from e
    return out


@functools.lru_cache(maxsize=1 << 16)
def _content_words(text: str) -> frozenset[str]:
    """A text's words (as BM25 cuts them) but its stop-words; cached, as every question of a
    paragraph weighs the same sentences."""
    return frozenset(w for w in Analyzer.words(text) if w not in STOP_WORDS)


def _near_miss(question: str, candidates: Iterable[str]) -> str | None:
    """The candidate sharing the most content words with the question (None: none shares)."""
    words = _content_words(question)
    best, best_n = None, 0
    for c in candidates:
        n = len(words & _content_words(c))
        if n > best_n:
            best, best_n = c, n
    return best


def squad_pairs(path: Path, split: str = "train") -> list[Pair]:
    """(question, answer sentence, the paragraph's closest non-answer) of one split."""
    pairs = []
    for q in squad_questions(path, split):
        answer = q.sentences[q.answer_sentence]
        others = (s for s in q.sentences if not q.answered_by(s))
        pairs.append(Pair(q.question, answer, _near_miss(q.question, others)))
    return pairs


def _opening(text: str, words: int = ANSWER_WORDS) -> str:
    """An answer's opening sentences, up to `words` words (a first sentence longer than that,
    a list of links run together, is cut)."""
    out: list[str] = []
    n = 0
    text = _HEADING.sub("", " ".join(text.split()))
    for _, sentence in split_sentences(text):
        size = len(sentence.split())
        if out and n + size > words:
            break
        out.append(sentence)
        n += size
    return " ".join(" ".join(out).split()[:words])


def _medquad_rows(path: Path) -> Iterator[dict[str, Any]]:
    def rows(fh: Any) -> list[dict[str, Any]]:
        return [json.loads(line) for line in fh if line.strip()]

    try:
        yield from _read_all(path, rows)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON Lines ({e})") from e


def medquad_pairs(path: Path) -> list[Pair]:
    """(question, the opening of its answer, the opening of an answer to another question
    about the same focus) of a MedQuAD JSON Lines file; questions without an answer are
    left out."""
    items: list[tuple[str, str, str]] = []
    try:
        for row in _medquad_rows(path):
            answer = _opening(str(row.get("answer") or ""))
            question = " ".join(str(row["question"]).split())
            if answer and question:
                items.append((question, answer, str(row.get("focus") or "")))
    except (KeyError, TypeError) as e:
        raise InputError(f"{path}: not a MedQuAD file ({type(e).__name__}: {e})") from e
    by_focus: dict[str, list[str]] = defaultdict(list)
    for _, answer, focus in items:
        by_focus[focus].append(answer)
    pairs = []
    for question, answer, focus in items:
        negative = next((a for a in by_focus[focus] if a != answer), None) if focus else None
        pairs.append(Pair(question, answer, negative))
    return pairs


def read_qa_file(path: Path) -> list[Pair]:
    """The pairs of one file: SQuAD JSON (training articles only) or MedQuAD JSON Lines."""
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return medquad_pairs(path)
    if name.endswith((".json", ".json.gz")):
        return squad_pairs(path, "train")
    raise InputError(f"{path}: not a question-answer file (SQuAD .json or MedQuAD .jsonl)")


def read_qa(paths: Iterable[str | Path]) -> list[Pair]:
    """The question → answer pairs of several files, in order."""
    return read_all_pairs(paths, read_qa_file, "question-answer pairs")
