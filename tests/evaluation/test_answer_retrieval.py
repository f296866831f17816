"""`qtsearch bench retrieval` on a SQuAD-format file: sentences indexed through the engine,
questions searched, a hit right when it is an answer sentence of the question's paragraph."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from cli_helpers import cli

from qtsearch.evaluation.retrieval import answer_retrieval
from qtsearch.search.hits import Hit

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def squad_file(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    with gzip.open(shared_data / "squad" / "train-v1.1.json.gz", "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    path = tmp_path_factory.mktemp("squad") / "squad.json"
    path.write_text(json.dumps({"data": data["data"][:3], "version": "1.1"}), encoding="utf-8")
    return path


def test_a_hit_is_right_only_in_the_questions_paragraph_and_holding_its_answer(squad_file):
    coll = answer_retrieval.load(squad_file, "all")
    qid, q = next(iter(coll.questions.items()))
    doc = coll.documents.index(q.paragraph)
    right = q.sentences[q.answer_sentence]
    wrong = next((s for s in q.sentences if not q.answered_by(s)), "nothing to see here")
    other_doc = next(i for i, p in enumerate(coll.documents) if p != q.paragraph)

    def hit(text: str, d: int) -> Hit:
        return Hit(id=0, text=text, source="s", line=1, doc=d, position=0)

    assert coll.score(qid, [hit(right, doc)]) == {"MRR@10": 1.0, "R@1": 1.0, "R@5": 1.0}
    assert coll.score(qid, [hit(wrong, doc), hit(right, doc)])["MRR@10"] == 0.5
    assert coll.score(qid, [hit(right, other_doc)])["MRR@10"] == 0.0  # right text, wrong place
    assert coll.score(qid, [])["R@5"] == 0.0


def test_bench_retrieval_scores_answer_sentences_through_the_engine(squad_file, tmp_path):
    markdown = tmp_path / "answers.md"
    result = cli("bench", "retrieval", str(squad_file), "--split", "all", "--systems",
                 "default:lexical,default:semantic,default:hybrid", "--json", "-q",
                 "--markdown", str(markdown))
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    (name, cells), = run["results"].items()
    assert name == f"{squad_file.parent.name}-all"
    assert set(cells) == {"BM25 (lexical)", "default · semantic", "default · hybrid"}
    for cell in cells.values():
        assert 0.0 <= cell["R@1"] <= cell["R@5"] <= 1.0 and cell["p50_ms"] > 0
        assert cell["R@1"] <= cell["MRR@10"] <= cell["R@5"] + 0.2
    # questions share the words of their answer: BM25 finds most of them
    assert cells["BM25 (lexical)"]["MRR@10"] > 0.5
    assert "| MRR@10 | R@1 | R@5 | p50 ms |" in markdown.read_text(encoding="utf-8")
