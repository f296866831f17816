"""Question → answer data from the real SQuAD and MedQuAD files: the by-article split, answer
sentences, near misses."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from qtsearch.core.errors import InputError
from qtsearch.text.datasets.qa import (
    is_dev_article,
    medquad_pairs,
    read_qa,
    squad_pairs,
    squad_questions,
)


@pytest.fixture(scope="module")
def squad_slice(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first 12 articles of SQuAD train (dev and training ones among them), as a file."""
    with gzip.open(shared_data / "squad" / "train-v1.1.json.gz", "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    articles = data["data"][:12]
    assert {is_dev_article(a["title"]) for a in articles} == {True, False}
    path = tmp_path_factory.mktemp("squad") / "slice.json"
    path.write_text(json.dumps({"data": articles, "version": "1.1"}), encoding="utf-8")
    return path


def test_the_split_is_by_article_and_covers_every_question(squad_slice):
    train, dev, every = (squad_questions(squad_slice, s) for s in ("train", "dev", "all"))
    assert {q.article for q in train}.isdisjoint({q.article for q in dev})
    assert all(is_dev_article(q.article) for q in dev)
    assert sorted(q.qid for q in train + dev) == sorted(q.qid for q in every)
    with pytest.raises(InputError, match="split must be one of"):
        squad_questions(squad_slice, "test")


def test_each_question_points_at_a_sentence_holding_its_answer(squad_slice):
    questions = squad_questions(squad_slice, "all")
    raw = json.loads(squad_slice.read_text(encoding="utf-8"))
    total = sum(len(p["qas"]) for a in raw["data"] for p in a["paragraphs"])
    assert len(questions) >= 0.99 * total  # only spans across a sentence break are left out
    for q in questions:
        answer_sentence = q.sentences[q.answer_sentence]
        assert q.answered_by(answer_sentence)
        assert len(q.sentences) >= 1 and answer_sentence in q.sentences


def test_training_pairs_come_from_training_articles_with_a_paragraph_near_miss(squad_slice):
    train = squad_questions(squad_slice, "train")
    dev_sentences = {s for q in squad_questions(squad_slice, "dev") for s in q.sentences}
    pairs = squad_pairs(squad_slice)
    assert len(pairs) == len(train)
    assert not any(p.positive in dev_sentences for p in pairs)
    with_negative = [(p, q) for p, q in zip(pairs, train, strict=True) if p.negative]
    assert len(with_negative) > 0.5 * len(pairs)
    for p, q in with_negative:
        assert p.negative in q.sentences and not q.answered_by(p.negative)


def test_medquad_pairs_answer_openings_and_same_focus_negatives(shared_data):
    pairs = medquad_pairs(shared_data / "medquad" / "medquad.jsonl.gz")
    assert len(pairs) > 15_000
    assert all(len(p.positive.split()) <= 60 and p.anchor for p in pairs)
    assert sum(p.negative is not None for p in pairs) > 0.7 * len(pairs)
    assert not any(p.positive.startswith("Key Points") for p in pairs)


def test_read_qa_refuses_other_files(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("not questions\n", encoding="utf-8")
    with pytest.raises(InputError, match="not a question-answer file"):
        read_qa([other])
