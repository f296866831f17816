"""A query answers the same asked alone or beside others (`Index.search_many`, and the server
that merges requests into one batch): the same hits, scores to the bit, legs and notes."""

from __future__ import annotations

from pathlib import Path

import pytest

import qtsearch

#: Asked many times over, so that its first fetch holds copies of one text only and its list is
#: fetched again deeper (qtsearch.search.hits.deepen), beside queries whose lists are not.
COPIED = "She was very happy to see her old friend again."


@pytest.fixture(scope="module")
def emma_with_copies(emma_lines: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """900 sentences of Emma in paragraphs of ten (documents), then COPIED 40 times, each copy
    a document, indexed flat with the shipped model (faiss scores a batch of queries in other
    kernels than one)."""
    folder = tmp_path_factory.mktemp("batches")
    lines = emma_lines.read_text(encoding="utf-8").splitlines()
    emma, copies = folder / "emma.txt", folder / "copies.txt"
    emma.write_text("\n\n".join("\n".join(lines[n:n + 10]) for n in range(0, len(lines), 10)),
                    encoding="utf-8")
    copies.write_text("\n\n".join([COPIED] * 40), encoding="utf-8")
    qtsearch.Index.build([emma, copies], folder / "idx", index="flat").close()
    return folder / "idx"


def _shown(results: qtsearch.Results) -> tuple:
    return ([(h.id, h.score, h.legs, [p.id for p in h.passages or ()]) for h in results],
            results.note)


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "lexical"])
@pytest.mark.parametrize("by", ["passage", "doc"])
def test_a_query_answers_the_same_alone_and_in_a_batch(emma_with_copies, mode, by):
    """Up to ALONE_UP_TO queries at once (what a server merges)."""
    queries = [COPIED, "Mr. Knightley walked to Hartfield in the rain.", "a letter from Jane",
               COPIED.upper(), "Harriet cried.", "What did Emma think of Mr. Elton?"]
    with qtsearch.Index.open(emma_with_copies) as index:
        alone = [_shown(index.search(q, 5, mode, by=by)) for q in queries]
        together = [_shown(r) for r in index.search_many(queries, 5, mode, by=by)]
        only = {"source": "emma.txt"}
        filtered_alone = [_shown(index.search(q, 5, mode, only, by=by)) for q in queries]
        filtered = [_shown(r) for r in index.search_many(queries, 5, mode, only, by=by)]
    assert together == alone
    assert filtered == filtered_alone
    # the copies filled the first fetch (20 passages, 30 by document), and five hits came of
    # fetching deeper
    assert len(alone[0][0]) == 5


def test_answers_to_many_queries_are_each_as_alone_and_a_bad_one_fails_alone(
        emma_with_copies):
    """`answer_queries` (what `qtsearch search` and the server answer) takes its queries 16 at
    a time: 20 queries, one of them blank (an error), each answered as alone, the bad one
    with its error, the others of its batch answered."""
    from qtsearch.core.errors import InputError
    from qtsearch.lifecycle.answers import answer_queries

    queries = [f"{COPIED[:-1]} {n}." if n % 3 else f"Emma thought of Mr. Elton {n} times."
               for n in range(20)]
    queries[5] = " "
    with qtsearch.Index.open(emma_with_copies) as index:
        answers = answer_queries(index, queries, 5, "semantic")
        for n, (query, hits, error) in enumerate(answers):
            assert query == queries[n]
            if n == 5:
                assert hits is None and isinstance(error, InputError)
                with pytest.raises(InputError, match=str(error)):
                    index.search(query, 5, "semantic")
            else:
                assert error is None
                assert _shown(hits) == _shown(index.search(query, 5, "semantic"))
