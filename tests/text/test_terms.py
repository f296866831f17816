"""qtsearch.text.terms: an ASCII text's words are found by a translation and a split, the
same words the Unicode pattern finds in its case-folded text; many texts' words at once
(`Analyzer.word_table`, what a build's BM25 analysis reads) are each text's words."""

from __future__ import annotations

import gzip
import itertools
import random
from pathlib import Path

from qtsearch.text.terms import WORD, Analyzer


def _unicode_words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def _as_table(texts: list[str]) -> list[list[str]]:
    """`Analyzer.word_table`'s words of each text, decoded."""
    table = Analyzer.word_table(texts)
    distinct, place, counts = table.distinct, table.place, table.counts
    assert len(set(distinct)) == len(distinct) and "" not in distinct
    assert sorted(set(place.tolist())) == list(range(len(distinct)))
    assert [distinct[i] for i in sorted(set(place.tolist()), key=place.tolist().index)] == \
        distinct  # in the order first met
    words = [distinct[i] for i in place.tolist()]
    ends = list(itertools.accumulate(counts.tolist()))
    return [words[end - n : end] for end, n in zip(ends, counts.tolist(), strict=True)]


def test_every_ascii_character_is_a_word_character_or_not_alike() -> None:
    for code in range(128):
        c = chr(code)
        assert Analyzer.words(f"a{c}b") == _unicode_words(f"a{c}b"), repr(c)
    texts = [f"{c}a{c}b{c}" for c in map(chr, range(128))]
    assert _as_table(texts) == [_unicode_words(t) for t in texts]


def test_mixed_texts_give_the_unicode_pattern_s_words() -> None:
    rng = random.Random(0)
    alphabet = "aZ9_ -'.\t\n" + "éİßǅﬁ½²Ⅻ" + "\u0301"  # accents, ligatures, digits of all kinds
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(30))) for _ in range(2000)]
    texts += ["Straße İstanbul ǅemal", "HELLO_World 12_34", "ﬁne ﬂow ½ ²", "Café CAFÉ"]
    for text in texts:
        assert Analyzer.words(text) == _unicode_words(text), repr(text)
    texts += ["", " ", "  x  ", "--", "\n", "é"]  # no words, or around spaces
    assert _as_table(texts) == [_unicode_words(t) for t in texts]
    assert _as_table([]) == []


def test_real_articles_give_the_same_words(shared_data: Path) -> None:
    shard = next(iter(sorted((shared_data / "wikipedia").rglob("wiki_00*"))))
    opener = gzip.open if shard.suffix == ".gz" else open
    with opener(shard, "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 3000))
    assert any(not line.isascii() for line in lines) and any(line.isascii() for line in lines)
    for line in lines:
        assert Analyzer.words(line) == _unicode_words(line)
    assert _as_table(lines) == [_unicode_words(line) for line in lines]
