"""Token-id rows held flat give what per-sentence lists give: the rows, subsets of them, and
`Vocab.encode` of each row (truncation, <unk>, casing, an empty row as [<unk>])."""

from __future__ import annotations

import numpy as np
import pytest

from qtsearch.encoders.base import default_model_path
from qtsearch.encoders.files import read_config, read_vocab
from qtsearch.encoders.nn.folder import encoder_config
from qtsearch.text import token_rows
from qtsearch.text.token_rows import TokenRows
from qtsearch.text.tokenizer import tokenize

SENTENCES = ["The Capital of Australia is Canberra.", "", "zzqx blorft Paris PARIS paris",
             "Photosynthesis in plants turns light into sugar and oxygen every single day."]


def test_rows_and_subsets_are_views_of_one_array() -> None:
    rows = TokenRows.from_rows([[1, 2, 3], [], [4], [5, 6]])
    assert [r.tolist() for r in rows] == [[1, 2, 3], [], [4], [5, 6]]
    picked = rows.take(np.array([3, 0, 3]))
    assert [r.tolist() for r in picked] == [[5, 6], [1, 2, 3], [5, 6]]
    assert picked.flat is rows.flat
    assert rows.row_of_each().tolist() == [0, 0, 0, 2, 3, 3]


def test_a_slice_of_rows_is_rows_and_flat_ids_read_them_whole() -> None:
    """What the build's encoder takes of a shard's rows: a slice is rows over the same array,
    and `flat_ids` gives the ids end to end and each row's count, as from lists; rows taken
    out of order are copied, in their order."""
    from qtsearch.encoders.base import flat_ids

    lists = [[1, 2, 3], [], [4], [5, 6], [7]]
    rows = TokenRows.from_rows(lists)
    part = rows[1:4]
    assert isinstance(part, TokenRows) and part.flat is rows.flat
    assert [r.tolist() for r in part] == lists[1:4]
    for got, want in ((rows, lists), (part, lists[1:4]), (rows[2:2], []),
                      (rows.take(np.array([3, 0])), [lists[3], lists[0]])):
        flat, lengths = flat_ids(got)
        ref_flat, ref_lengths = flat_ids(want)
        assert flat.dtype == ref_flat.dtype == np.int64
        assert flat.tolist() == ref_flat.tolist() and lengths.tolist() == ref_lengths.tolist()
    assert np.shares_memory(rows[1:4].joined(), rows.flat)


@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_encoded_rows_are_what_the_vocabulary_encodes(chunk: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """In one chunk of rows and in several."""
    monkeypatch.setattr(token_rows, "CHUNK", chunk)
    folder = default_model_path()
    vocab = read_vocab(folder, encoder_config(read_config(folder)))
    types: dict[str, int] = {}
    rows = TokenRows.from_rows([types.setdefault(t, len(types)) for t in tokenize(s)]
                               for s in SENTENCES)
    lookup = np.array([vocab.encode([t], 1, fold_case=True)[0] for t in types])
    for max_len in (1, 4, 64):
        expected = [vocab.encode(tokenize(s), max_len, fold_case=True) for s in SENTENCES]
        assert [r.tolist() for r in rows.encoded(lookup, max_len)] == expected
        picked = rows.encoded(lookup, max_len).take(np.array([2, 1]))
        assert [r.tolist() for r in picked] == [expected[2], expected[1]]
        assert [r.tolist() for r in rows.take(np.array([3, 1])).encoded(lookup, max_len)] == [
            expected[3], expected[1]]
    assert 1 in expected[2] and expected[1] == [1]  # unknown words and the empty sentence
