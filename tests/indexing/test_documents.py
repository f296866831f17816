"""Documents: records input (JSON Lines, CSV, Parquet, BEIR's corpus as it is), passages that
remember their document, results by document, no repeated texts, and `bench retrieval`."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qtsearch.app.cli import main
from qtsearch.core.errors import InputError, UsageError
from qtsearch.evaluation.retrieval import beir
from qtsearch.indexing.pipeline import IndexConfig, build_index
from qtsearch.search.searcher import Searcher
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.reader import read_sentences
from qtsearch.text.records import passages, read_records

N_DOCS = 300


def _scifact(shared: Path) -> list[dict]:
    with gzip.open(shared / "beir" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(N_DOCS), f)]


@pytest.fixture(scope="module")
def records(shared_data: Path) -> list[dict]:
    return _scifact(shared_data)


@pytest.fixture(scope="module")
def jsonl(records: list[dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("records") / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def index(jsonl: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("idx") / "scifact"
    build_index(IndexConfig(corpus=[str(jsonl)], out=str(out)))
    return out


def test_passages_keep_sentence_order_within_the_word_limit() -> None:
    sentences = ["a b c.", "d e.", "f g h i.", "j."]
    words = [len(s.split()) for s in sentences]
    assert passages(words, sentences, 5) == ["a b c. d e.", "f g h i. j."]
    assert passages(words, sentences, 2) == ["a b c.", "d e.", "f g h i.", "j."]
    assert passages(words, sentences, 0) == [" ".join(sentences)]


def test_beir_corpus_is_read_as_it_is(shared_data: Path, records: list[dict]) -> None:
    got = list(read_records(shared_data / "beir" / "scifact" / "corpus.jsonl.gz",
                            passage_words=200))
    first = records[0]
    mine = [p for p in got if p.doc_id == first["_id"]]
    assert mine and all(p.text.startswith(first["title"]) for p in mine)
    assert [p.position for p in mine] == list(range(len(mine)))
    # every word of the abstract is in its passages, in order
    body = " ".join(p.text.removeprefix(first["title"]).strip() for p in mine)
    assert body.split() == first["text"].split()
    assert len({p.doc_id for p in got}) == 5183
    assert max(len(p.text.split()) for p in got if len(p.text.split()) > 0) < 10_000


def test_jsonl_csv_and_parquet_give_the_same_documents(
        records: list[dict], jsonl: Path, tmp_path: Path) -> None:
    rows = [{"_id": r["_id"], "title": r["title"], "text": r["text"]} for r in records]
    with (tmp_path / "c.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["_id", "title", "text"])
        w.writeheader()
        w.writerows(rows)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    want = [(s.text, s.doc, s.position, s.doc_id, s.title) for s in read_sentences([jsonl])]
    for name in ("c.csv", "c.parquet"):
        got = [(s.text, s.doc, s.position, s.doc_id, s.title)
               for s in read_sentences([tmp_path / name])]
        assert got == want, name
    assert len({d for _, d, *_ in want}) == N_DOCS


def test_field_names_can_be_given(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text(json.dumps({"key": "n1", "heading": "Boats", "note": "Boats float. "
                                "Ships too."}) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="no text/body/content"):
        list(read_sentences([path]))
    from qtsearch.text.records import RecordFields

    (s,) = read_sentences([path], options=ReadOptions(
        fields=RecordFields("key", "heading", "note")))
    assert (s.text, s.doc_id, s.title) == ("Boats. Boats float. Ships too.", "n1", "Boats")


def test_bad_records_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.jsonl:2: not a JSON object"):
        list(read_sentences([path]))


def test_paragraph_documents_in_running_text(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("One here. Two here.\n\nThree here.\n", encoding="utf-8")
    by_file = [s.doc for s in read_sentences([path], split=True)]
    by_paragraph = [s.doc for s in read_sentences(
        [path], options=ReadOptions(split=True, docs="paragraph"))]
    assert by_file == [0, 0, 0] and by_paragraph == [0, 0, 1]


def test_search_by_document(index: Path, records: list[dict]) -> None:
    with Searcher.open(index) as idx:
        assert idx.count > N_DOCS  # long abstracts are several passages
        for mode in ("hybrid", "semantic", "lexical"):
            by_passage = idx.search(records[0]["title"], 30, mode)[0]
            by_doc = idx.search(records[0]["title"], 10, mode, by="doc")[0]
            docs = [h.doc for h in by_doc]
            assert len(docs) == len(set(docs)) == 10
            # documents come in the order of their best passage
            firsts = list(dict.fromkeys(h.doc for h in by_passage))
            assert docs[:5] == firsts[:5]
            for h in by_doc:
                assert h.doc_id is not None and h.title
                assert all(p.doc == h.doc and p.score <= h.score for p in h.passages)
        assert by_doc[0].doc_id == records[0]["_id"]


def test_identical_texts_are_shown_once(tmp_path: Path, shared_data: Path) -> None:
    lines = (shared_data / "sts" / "sick2014" / "SICK_trial.txt").read_text(
        encoding="utf-8").splitlines()[1:200]
    sentences = [line.split("\t")[1] for line in lines]
    corpus = tmp_path / "dup.txt"
    corpus.write_text("".join(f"{s}\n" for s in sentences * 3), encoding="utf-8")
    build_index(IndexConfig(corpus=[str(corpus)], out=str(tmp_path / "i")))
    with Searcher.open(tmp_path / "i") as idx:
        for mode in ("hybrid", "semantic", "lexical"):
            hits = idx.search(sentences[0], 10, mode)[0]
            texts = [" ".join(h.text.casefold().split()) for h in hits]
            assert len(texts) == len(set(texts)) == 10, mode


def test_cli_search_by_doc_json(index: Path, records: list[dict], capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["search", str(index), records[1]["title"], "--by", "doc", "-k", "3", "--json"])
    assert (done.value.code or 0) == 0
    (answer,) = json.loads(capsys.readouterr().out)
    hits = answer["hits"]
    assert hits[0]["doc_id"] == records[1]["_id"] and "passages" in hits[0]
    assert len({h["doc"] for h in hits}) == 3


def test_ndcg_recall_mrr_by_hand() -> None:
    rel = {"a": 2, "b": 1}
    assert beir.ndcg(["a", "b", "x"], rel) == pytest.approx(1.0)
    # b first (gain 1 at rank 1), a third (gain 2 / log2 4 = 1): dcg 2; idcg 2 + 1/log2 3
    assert beir.ndcg(["b", "x", "a"], rel) == pytest.approx(2 / (2 + 1 / 1.584962500721156))
    assert beir.recall(["x", "a"], rel) == 0.5
    assert beir.mrr(["x", "y", "b"], rel) == pytest.approx(1 / 3)


@pytest.mark.slow
def test_bench_retrieval_on_a_real_subset(shared_data: Path, records: list[dict],
                                          jsonl: Path, tmp_path: Path, capsys,
                                          monkeypatch) -> None:
    """A BEIR folder of the first documents and the train queries judged within them: every
    system is scored, and BM25 ranks a known claim's abstract first."""
    monkeypatch.setenv("QTSEARCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "mini"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(jsonl.read_text(encoding="utf-8"), encoding="utf-8")
    ids = {r["_id"] for r in records}
    src = shared_data / "beir" / "scifact"
    judged = [line for line in (src / "qrels" / "train.tsv").read_text().splitlines()[1:]
              if line.split("\t")[1] in ids]
    assert len(judged) >= 10
    (folder / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "\n".join(judged) + "\n")
    wanted = {line.split("\t")[0] for line in judged}
    queries = [line for line in (src / "queries.jsonl").read_text().splitlines()
               if json.loads(line)["_id"] in wanted]
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n")
    with pytest.raises(SystemExit) as done:
        main(["bench", "retrieval", str(folder), "--baselines", "none", "--json", "-q",
              "--chart", str(tmp_path / "chart.png")])
    assert (done.value.code or 0) == 0
    data = json.loads(capsys.readouterr().out)
    cells = data["results"]["mini"]
    assert set(cells) == {"default · hybrid", "default · semantic", "BM25 (lexical)"}
    for cell in cells.values():
        assert 0 <= cell["nDCG@10"] <= 1 and cell["queries"] == len(wanted)
    # claims share their abstract's rare words: BM25 over 300 abstracts finds most of them
    assert cells["BM25 (lexical)"]["MRR@10"] > 0.5
    assert data["collections"]["mini"]["split"] == "train"
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fusion_settings_follow_the_rows_length() -> None:
    from qtsearch.search.fusion import (
        ALIGNMENT_DEPTH,
        FEEDBACK,
        LEXICAL_FEEDBACK,
        PASSAGE_ALIGNMENT_DEPTH,
        PASSAGE_LEXICAL_WEIGHT,
        PASSAGE_TERMS,
        SENTENCE_TERMS,
        SearchSettings,
        settings_for,
    )

    assert settings_for(0.2, None) == settings_for(0.2, SENTENCE_TERMS)
    near = settings_for(0.2, 5.0)
    assert (near.lexical_weight, near.feedback, near.lexical_feedback,
            near.alignment_depth) == (0.2, 0, 0, ALIGNMENT_DEPTH)
    far = settings_for(0.2, PASSAGE_TERMS * 3)
    assert (far.lexical_weight, far.feedback, far.lexical_feedback, far.alignment_depth) == (
        PASSAGE_LEXICAL_WEIGHT, FEEDBACK, LEXICAL_FEEDBACK, PASSAGE_ALIGNMENT_DEPTH)
    assert PASSAGE_ALIGNMENT_DEPTH > ALIGNMENT_DEPTH
    mid = settings_for(0.2, (SENTENCE_TERMS + PASSAGE_TERMS) / 2)
    assert mid.lexical_weight == pytest.approx((0.2 + PASSAGE_LEXICAL_WEIGHT) / 2)
    assert mid.feedback == pytest.approx(FEEDBACK / 2)
    assert mid.lexical_feedback == pytest.approx(LEXICAL_FEEDBACK / 2)
    assert mid.alignment_depth == round((ALIGNMENT_DEPTH + PASSAGE_ALIGNMENT_DEPTH) / 2)
    # a search may still ask for its own depth
    assert settings_for(0.2, PASSAGE_TERMS, alignment_depth=7).alignment_depth == 7
    for bad in (-0.1, 1.0):
        with pytest.raises(UsageError, match="lexical_feedback"):
            SearchSettings(lexical_feedback=bad)


def test_passages_fuse_with_feedback_and_sentences_without(
        index: Path, records: list[dict], tmp_path: Path, shared_data: Path) -> None:
    from qtsearch.search.fusion import (
        ALIGNMENT_DEPTH,
        FEEDBACK,
        LEXICAL_FEEDBACK,
        PASSAGE_ALIGNMENT_DEPTH,
        PASSAGE_LEXICAL_WEIGHT,
    )

    claim = "Statins lower the risk of heart disease."
    with Searcher.open(index) as idx:
        own = idx.settings
        assert (own.lexical_weight, own.feedback, own.lexical_feedback,
                own.alignment_depth) == (PASSAGE_LEXICAL_WEIGHT, FEEDBACK, LEXICAL_FEEDBACK,
                                         PASSAGE_ALIGNMENT_DEPTH)
        # hybrid search's lexical leg is expanded by its first hits' terms; lexical mode and
        # hybrid without lexical feedback rank by BM25 itself
        expanded = idx.search(claim, 5, "hybrid")[0]
        plain = idx.search(claim, 5, "hybrid",
                           settings=dataclasses.replace(own, lexical_feedback=0.0))[0]
        bm25 = {h.id: h.score for h in idx.search(claim, 50, "lexical")[0]}
        assert all(h.legs["lexical"] == pytest.approx(bm25.get(h.id, h.legs["lexical"]))
                   for h in plain)
        assert [h.legs["lexical"] for h in expanded] != [h.legs["lexical"] for h in plain]
        with_fb = idx.search(claim, 5, "hybrid")[0]
        without = idx.search(claim, 5, "hybrid",
                             settings=dataclasses.replace(own, feedback=0.0))[0]
        first_lexical = idx.search(claim, 1, "lexical")[0][0].id
        # word alignment looks at the first PASSAGE_ALIGNMENT_DEPTH passages again, not 30
        deep = idx.search(claim, PASSAGE_ALIGNMENT_DEPTH + 20, "semantic")[0]
        assert idx.count > PASSAGE_ALIGNMENT_DEPTH + 20
        assert ["alignment" in h.legs for h in deep] == [True] * PASSAGE_ALIGNMENT_DEPTH + [
            False] * 20
    # the query vector moved towards the first BM25 hits: their cosine rose
    cos = {h.id: h.legs["semantic"] for h in with_fb}
    before = {h.id: h.legs["semantic"] for h in without}
    if first_lexical in cos and first_lexical in before:
        assert cos[first_lexical] > before[first_lexical]
    assert [h.legs["semantic"] for h in with_fb] != [h.legs["semantic"] for h in without]
    lines = [line.split("\t")[1] for line in (shared_data / "sts" / "sick2014" /
             "SICK_trial.txt").read_text(encoding="utf-8").splitlines()[1:300]]
    corpus = tmp_path / "sentences.txt"
    corpus.write_text("".join(f"{s}\n" for s in lines), encoding="utf-8")
    build_index(IndexConfig(corpus=[str(corpus)], out=str(tmp_path / "s")))
    with Searcher.open(tmp_path / "s") as idx:
        model_weight = float(idx.encoder.search["lexical_weight"])
        assert (idx.settings.lexical_weight, idx.settings.feedback,
                idx.settings.lexical_feedback, idx.settings.alignment_depth) == (
            model_weight, 0.0, 0.0, ALIGNMENT_DEPTH)


def test_a_long_line_is_read_in_pieces_that_split_no_word(tmp_path: Path, monkeypatch) -> None:
    import qtsearch.text.reader as reader

    monkeypatch.setattr(reader, "LINE_CHUNK", 64)
    sentences = [f"Sentence {i} is über long." for i in range(200)]
    (tmp_path / "long.txt").write_text(" ".join(sentences) + "\nShort line.\n",
                                       encoding="utf-8")
    split = [s.text for s in read_sentences([tmp_path / "long.txt"], split=True)]
    assert split == [*sentences, "Short line."]
    lines = list(read_sentences([tmp_path / "long.txt"]))
    assert [(s.line, s.text) for s in lines][1] == (2, "Short line.")
    assert lines[0].text.startswith("Sentence 0 is über long. Sentence 1") and len(lines) == 2


@pytest.mark.slow
def test_a_50_mb_single_line_is_read_in_bounded_memory(tmp_path: Path,
                                                       shared_data: Path) -> None:
    """Running text of one 50 MB line (a Gutenberg book's paragraphs joined, repeated) is
    split and indexed without holding the line: peak memory well under the line's size."""
    import subprocess
    import sys

    with gzip.open(shared_data / "gutenberg" / "0003-austen-jane--emma.txt.gz", "rt",
                   encoding="utf-8") as f:
        book = " ".join(f.read().split())
    line = (book + " ") * (50_000_000 // len(book) + 1)
    (tmp_path / "one.txt").write_text(line[:50_000_000] + "\n", encoding="utf-8")
    del line, book
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
    script = ("import sys\n"
              "from qtsearch.text.reader import read_sentences\n"
              "n = sum(1 for _ in read_sentences([sys.argv[1]], split=True))\n"
              "hwm = [x for x in open('/proc/self/status') if x.startswith('VmHWM')][0]\n"
              "print(n, hwm.split()[1])\n")
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "one.txt")],
                         capture_output=True, text=True, check=True).stdout.split()
    sentences, peak_kb = int(out[0]), int(out[1])
    assert peak_kb < 300_000, f"peak {peak_kb / 1000:.0f} MB reading a 50 MB line"
    assert sentences > 300_000


def test_the_shell_and_the_server_search_by_document(index: Path, records: list[dict]) -> None:
    import io

    import httpx
    from rich.console import Console
    from serve_fixtures import serving

    from qtsearch.app.shell import Shell
    from qtsearch.lifecycle.facade import Index

    # a document of several passages, each starting with its title
    title = next(r["title"] for r in records if len(r["text"].split()) > 450)
    with Index.open(index) as idx:
        want = [h.doc_id for h in idx.search(title, 5, by="doc")]
        shown = {}
        for by in ("passage", "doc"):
            shell = Shell(idx, k=5, console=Console(file=io.StringIO(), width=1000))
            shell.handle(f":by {by}")
            assert shell.by == by
            shell.handle(title)
            shown[by] = shell.console.file.getvalue()
        with pytest.raises(UsageError, match=":by UNIT"):
            shell.handle(":by page")
    # the title stands in a row's text and its source: twice for the one row of its document,
    # more often where its passages are rows of their own
    assert shown["doc"].count(title) == 2 < shown["passage"].count(title)
    with serving(index) as url:
        page = httpx.get(f"{url}/").text
        assert 'id="by-doc"' in page
        got = httpx.get(f"{url}/search", params={"q": title, "k": 5, "by": "doc"}).json()
    assert [h["doc_id"] for h in got[0]["hits"]] == want
    assert all("passages" in h for h in got[0]["hits"])
