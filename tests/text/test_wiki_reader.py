"""WikiExtractor input on real Wikipedia shards: articles are documents, their title, id and url
travel with every sentence, headings become sections and are not sentences; training reads the
same articles."""

from __future__ import annotations

import gzip
import re
from collections import defaultdict
from pathlib import Path

import pytest

from qtsearch.core.errors import InputError, UsageError
from qtsearch.text.read_options import ReadOptions
from qtsearch.text.reader import Sentence, is_wikiextractor, read_sentences
from qtsearch.text.splitter import split_sentences, split_text
from qtsearch.text.token_corpus import TokenCorpus
from qtsearch.text.wikiextractor import doc_tag, is_heading

SHARDS = ["wikipedia/AA/wiki_00.gz", "wikipedia/AB/wiki_50.gz"]
BOOK = "gutenberg/0003-austen-jane--emma.txt.gz"


def raw_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return fh.read().split("\n")


def articles_of(lines: list[str]) -> list[tuple[str, str, str, list[str]]]:
    """(id, url, title, body lines) of every `<doc>` in the raw file, read independently of
    the reader with a plain regular expression."""
    out = []
    for line in lines:
        m = re.match(r'<doc id="(\d+)" url="([^"]+)" title="([^"]*)">$', line)
        if m:
            out.append((*m.groups(), []))
        elif line != "</doc>" and out:
            out[-1][3].append(line)
    return out


@pytest.fixture(scope="module")
def shards(shared_data: Path) -> list[Path]:
    return [shared_data / s for s in SHARDS]


@pytest.fixture(scope="module")
def sentences(shards: list[Path]) -> list[Sentence]:
    return list(read_sentences([str(s) for s in shards]))


def test_each_article_is_one_document_with_its_id_url_and_title(shards, sentences):
    raw = [a for s in shards for a in articles_of(raw_lines(s))]
    by_doc: dict[int, list[Sentence]] = defaultdict(list)
    for s in sentences:
        by_doc[s.doc].append(s)
    assert sorted(by_doc) == list(range(len(by_doc)))  # documents numbered in reading order
    assert len(by_doc) == len(raw) > 50  # every article is a document, none empty
    for (doc_id, url, title, _), doc in zip(raw, (by_doc[d] for d in sorted(by_doc)),
                                            strict=True):
        assert {(s.doc_id, s.url, s.title) for s in doc} == {(doc_id, url, title)}
        assert [s.position for s in doc] == list(range(len(doc)))
        assert len({s.source for s in doc}) == 1  # no article spans two files
    texts = [s.text for s in sentences]
    assert not any(t.startswith("<doc") or "</doc>" in t for t in texts)


def test_titles_and_headings_are_metadata_not_sentences(shards, sentences):
    first = next(s for s in sentences if s.title == "Anarchism")
    assert first.position == 0 and first.section == "" and first.line == 4
    assert first.text.startswith("Anarchism is a political philosophy")
    assert {"Etymology and terminology", "Origins", "Anarchist schools of thought"} <= {
        s.section for s in sentences if s.title == "Anarchism"}
    for shard in shards:
        lines = raw_lines(shard)
        mine = [s for s in sentences if s.source == str(shard)]
        indexed = {(s.line, s.text) for s in mine}
        sections = defaultdict(set)
        for s in mine:
            sections[s.line].add(s.section)
        # headings: heading-shaped lines in a run that text follows (WikiExtractor prints
        # headings only right before text; a run that ends its article was sentences)
        headings, run = [], []
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            if is_heading(line.strip()):
                run.append((n, line.strip()))
                continue
            if line != "</doc>":
                headings += run
                if run:  # the text under a run has the run's last heading as its section
                    assert sections[n] == {run[-1][1][:-1]}, (n, run)
            run = []
        assert len(headings) > 100
        assert not any(h in indexed for h in headings)  # never a sentence
        # the title line after <doc …> is not a sentence either
        for n, line in enumerate(lines, 1):
            if doc_tag(line) is not None:
                assert (n + 1, lines[n]) not in indexed


def test_sentence_lines_point_at_their_paragraph(shards, sentences):
    lines = {str(s): raw_lines(s) for s in shards}
    for s in sentences[::97]:
        words = s.text.split()[:4]
        assert " ".join(words) in " ".join(lines[s.source][s.line - 1].split())


def test_fast_splitter_gives_the_offset_splitters_sentences(shards):
    paragraphs = [t for t in raw_lines(shards[0]) if t and not t.startswith("<")]
    assert len(paragraphs) > 1000
    for p in paragraphs:
        assert split_text(p) == [s for _, s in split_sentences(p)]


def test_heading_shapes() -> None:
    for heading in ["History.", "Etymology and terminology.", "See also.",
                    "Chenla Kingdom (6th century – 802).", '"Microscopic" versus "macroscopic".',
                    "1986–1993: Breakthrough and the first major title."]:
        assert is_heading(heading), heading
    for sentence in ["Cameroon's Air Force has 9 combat-capable aircraft.",
                     "where formula_8 is the angle between v and B.",
                     'Let "X" be a topological space.', "George Woodcock states:",
                     "The first known use of this word was in 1539.",
                     "He was born in Paris. He died in Rome.", "And so on...",
                     "It began in 1940.",
                     "A sentence of more than ten words that has no verb of the list."]:
        assert not is_heading(sentence), sentence


def test_format_is_detected_chosen_or_refused(shared_data, shards, tmp_path):
    book = shared_data / BOOK
    assert is_wikiextractor(shards[0]) and not is_wikiextractor(book)
    # one "sentence" a line
    as_text = list(read_sentences([shards[0]], options=ReadOptions(fmt="text")))
    assert as_text[0].text.startswith("<doc id=") and as_text[0].title is None
    with pytest.raises(InputError, match="not WikiExtractor output"):
        list(read_sentences([book], options=ReadOptions(fmt="wikiextractor")))
    with pytest.raises(UsageError, match="--format"):
        list(read_sentences([book], options=ReadOptions(fmt="wiki")))
    # a book and a Wikipedia shard in one corpus: each read in its own layout
    mixed = list(read_sentences([book, shards[0]], split=True))
    assert mixed[0].title is None and mixed[-1].title is not None
    assert mixed[-1].doc > mixed[0].doc


def test_headings_left_without_text_are_sentences(tmp_path: Path) -> None:
    f = tmp_path / "wiki_00"
    f.write_text('<doc id="7" url="http://x/?curid=7" title="Tom &amp; Jerry">\nTom &amp; Jerry\n'
                 "\nIt is a cartoon.\nHistory.\nIt began in 1940.\nThe end.\n</doc>\n",
                 encoding="utf-8")
    got = [(s.text, s.section, s.title, s.position) for s in read_sentences([f])]
    assert got == [("It is a cartoon.", "", "Tom & Jerry", 0),
                   ("It began in 1940.", "History", "Tom & Jerry", 1),
                   ("The end.", "History", "Tom & Jerry", 2)]


def test_training_reads_articles_as_documents(shards, sentences, tmp_path):
    tc = TokenCorpus.build([str(shards[0])], tmp_path / "tc", split=False, vocab_size=20_000,
                           max_len=60)
    mine = [s for s in sentences if s.source == str(shards[0])]
    assert len(tc) == len(mine)
    assert [int(d) for d in tc.docs] == [s.doc for s in mine]
    ids, _, _ = tc.batch(0, 1)
    assert tc.vocab.words[int(ids[0][0])] == "Anarchism"  # the first sentence, not the title
