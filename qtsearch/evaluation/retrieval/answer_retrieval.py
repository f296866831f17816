"""Sentence-level answer retrieval (ReQA, Ahmad et al. 2019) from a SQuAD-format file: every
sentence of the chosen articles' paragraphs is indexed (a paragraph is a document), each
question is searched, and a hit is right when it is a sentence of the question's own paragraph
that holds one of its answers.

The articles default to the development side of the by-article split
(`qtsearch.text.datasets.qa.is_dev_article`), which the shipped model never trained on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qtsearch.core.config import write_text_atomic
from qtsearch.core.errors import InputError
from qtsearch.core.paths import cache_dir
from qtsearch.lifecycle import Hit
from qtsearch.text.datasets.qa import SquadQuestion, squad_questions

METRICS = ("MRR@10", "R@1", "R@5")
#: Hits searched per question (MRR@10 needs 10).
DEPTH = 10


@dataclass
class AnswerCollection:
    """The questions of one split of a SQuAD-format file and the sentence file indexed for
    them (one sentence a line, a blank line between paragraphs: `build-index` text input)."""

    name: str
    source: Path
    split: str
    questions: dict[str, SquadQuestion]
    corpus: Path
    #: The paragraph of each indexed document, in the order of the sentence file.
    documents: list[int] = field(default_factory=list)

    by: str = "passage"  # questions find sentences, not documents
    metrics: tuple[str, ...] = METRICS
    depth: int = DEPTH
    input_format: str = "text"
    #: One sentence a row whatever the passage size asked for documents.
    keeps_passage_words: bool = False

    @property
    def queries(self) -> dict[str, str]:
        return {qid: q.question for qid, q in self.questions.items()}

    def score(self, qid: str, hits: Sequence[Hit]) -> dict[str, float]:
        """MRR@10, R@1 and R@5 of one question's hits."""
        q = self.questions[qid]
        right = [self.documents[h.doc] == q.paragraph and q.answered_by(h.text)
                 for h in hits[: self.depth]]
        first = next((i for i, r in enumerate(right) if r), None)
        return {"MRR@10": 0.0 if first is None else 1.0 / (first + 1),
                "R@1": float(first is not None and first < 1),
                "R@5": float(first is not None and first < 5)}


def _sentence_file(questions: Sequence[SquadQuestion], name: str) -> tuple[Path, list[int]]:
    """The sentences of the questions' paragraphs written once under the cache (one a line,
    a blank line between paragraphs) and the paragraph of each document, in order."""
    paragraphs: dict[int, tuple[str, ...]] = {}
    for q in questions:
        paragraphs.setdefault(q.paragraph, q.sentences)
    order = sorted(paragraphs)
    text = "\n\n".join("\n".join(" ".join(s.split()) for s in paragraphs[p]) for p in order)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = cache_dir("retrieval", "corpora") / f"{name}-{digest}.txt"
    if not path.is_file():
        write_text_atomic(path, text + "\n")
    return path, order


def load(path: str | Path, split: str = "dev") -> AnswerCollection:
    """Answer retrieval over the `split` articles of a SQuAD-format file."""
    source = Path(path)
    if not source.is_file():
        raise InputError(f"{source}: no such file")
    questions = squad_questions(source, split)
    if not questions:
        raise InputError(f"{source}: no question of the {split} articles has an answer "
                         "sentence")
    name = f"{source.parent.name or source.stem}-{split}"
    corpus, documents = _sentence_file(questions, name)
    return AnswerCollection(name, source, split, {q.qid: q for q in questions}, corpus,
                            documents)


def is_answer_file(path: str | Path) -> bool:
    """Whether `path` names a SQuAD-format file rather than a BEIR folder."""
    return Path(path).name.lower().endswith((".json", ".json.gz"))
