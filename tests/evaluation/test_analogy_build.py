"""Building the Yelp analogy tuples: categories, mining rules, determinism, the committed file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from qtsearch.core.errors import InputError
from qtsearch.evaluation.analogy.build import (
    DEFAULT_TUPLES,
    SENTIMENT,
    BuildConfig,
    BuildResult,
    read_tuples,
    sentiment_tuples,
    word_tuples,
    write_tuples,
)
from qtsearch.evaluation.analogy.categories import (
    MSR_CATEGORIES,
    WordPairs,
    categorise_msr,
    load_word_pairs,
    morphology_label,
)
from qtsearch.evaluation.analogy.data import load_rewrites, load_yelp, normalise
from qtsearch.evaluation.analogy.mining import WILDCARD, content, mine_pairs, within_one_edit


@pytest.fixture(scope="module")
def word_pairs(shared_data: Path) -> WordPairs:
    return load_word_pairs(shared_data / "analogy")


# --- categories ---------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "expected"), [
    ("rough", "rougher", ("JJ/JJR", False)),
    ("rougher", "rough", ("JJ/JJR", True)),
    ("big", "biggest", ("JJ/JJS", False)),
    ("costlier", "costliest", ("JJR/JJS", False)),
    ("city", "city's", ("NN/NNPOS", False)),
    ("stop", "stopped", ("VB/VBD", False)),
    ("tried", "try", ("VB/VBD", True)),
    ("asked", "asks", ("VBD/VBZ", False)),
    ("discussed", "discuss", ("VB/VBD", True)),  # not "discus" + -ed / -s
    ("company", "companies", ("-s form", False)),
    ("good", "better", None),  # irregular: decided by the other pair of its question
])
def test_morphology_rule(a: str, b: str, expected: tuple[str, bool] | None) -> None:
    assert morphology_label(a, b) == expected


def test_msr_rule_propagates_and_tells_verbs_from_nouns() -> None:
    questions = [
        (("good", "better"), ("rough", "rougher")),  # irregular takes its partner's category
        (("walk", "walked"), ("talk", "talked")),    # walk is a verb ...
        (("walk", "walks"), ("run", "runs")),        # ... so walk → walks is VB/VBZ
        (("car", "cars"), ("dog", "dogs")),          # never seen with -ed: nouns
        (("ran", "runs"), ("won", "wins")),          # irregular VBD/VBZ from the -s form
        (("walked", "walks"), ("won", "wins")),
    ]
    labels, unresolved = categorise_msr(questions)
    assert unresolved == 0
    assert labels[("good", "better")] == "JJ/JJR"
    assert labels[("walk", "walks")] == labels[("run", "runs")] == "VB/VBZ"
    assert labels[("car", "cars")] == labels[("dog", "dogs")] == "NN/NNS"
    assert labels[("won", "wins")] == labels[("walked", "walks")] == "VBD/VBZ"


def test_real_word_pairs_have_their_categories(word_pairs: WordPairs) -> None:
    cats = word_pairs.category
    assert cats[("his", "her")] == "family"
    assert cats[("good", "better")] == "gram3-comparative"  # Google wins over MSR
    assert cats[("rough", "rougher")] == "JJ/JJR"
    assert cats[("city", "city's")] == "NN/NNPOS"
    assert cats[("asked", "asks")] == "VBD/VBZ"  # stored base → derived, whatever the file order
    assert word_pairs.msr_unresolved == 0
    counts = word_pairs.counts()
    assert all(counts[c] >= 60 for c in MSR_CATEGORIES)
    assert {"family", "capital-world", "gram9-plural-verbs"} <= set(counts)


# --- mining -------------------------------------------------------------------------------

def test_within_one_edit() -> None:
    assert within_one_edit(list("abc"), list("abc")) == 0
    assert within_one_edit(list("abc"), list("axc")) == 1
    assert within_one_edit(list("abc"), list("abxc")) == 1
    assert within_one_edit(list("abc"), list("ac")) == 1
    assert within_one_edit(list("abcd"), list("bacd")) is None  # a transposition is two edits
    assert within_one_edit(list("abc"), list("xbz")) is None


PAPER = ["dr. <person> and his staff are simply amazing !",
         "dr. <person> and her staff are simply amazing ! ! !"]


def test_the_papers_example_pair_is_found() -> None:
    pairs = mine_pairs(PAPER, {("his", "her")})
    assert [(p.w1, p.w2, p.first, p.second, p.extra) for p in pairs] == [("his", "her", 0, 1, 0)]


def test_one_further_token_may_differ_but_not_two() -> None:
    sentences = [
        "the staff is very friendly .",        # 0
        "the staff was friendly .",            # 1: was, and "very" deleted → extra 1
        "the staff was really friendly .",     # 2: was, very → really → extra 1
        "the new staff was really friendly",   # 3: two further differences from 0
        "staff really was very friendly .",    # 4: order changed: two edits from 0
        "the staff is very friendly , too !",  # 5: one more word than 0, and punctuation
        "the staff was very friendly ! !",     # 6: only was → is and punctuation differ from 0
    ]
    pairs = mine_pairs(sentences, {("was", "is")})
    assert {(p.first, p.second): p.extra for p in pairs} == {
        (1, 0): 1, (2, 0): 1, (6, 0): 0, (6, 5): 1}
    assert all((p.w1, p.w2) == ("was", "is") for p in pairs)


def test_pairs_need_enough_shared_words() -> None:
    assert mine_pairs(["his dog .", "her dog ."], {("his", "her")}) == []
    assert len(mine_pairs(["his dog is cute .", "her dog is cute ."], {("his", "her")})) == 1


def _check_pair(a: str, b: str, w1: str, w2: str) -> int | None:
    """Edit distance left after aligning w1 in a with w2 in b (best alignment)."""
    best = None
    ca, cb = content(a), content(b)
    for i, x in enumerate(ca):
        for j, y in enumerate(cb):
            if x == w1 and y == w2:
                d = within_one_edit([*ca[:i], WILDCARD, *ca[i + 1:]],
                                    [*cb[:j], WILDCARD, *cb[j + 1:]])
                if d is not None and (best is None or d < best):
                    best = d
    return best


# --- the committed tuples -----------------------------------------------------------------

@pytest.fixture(scope="module")
def committed() -> list:
    return read_tuples(DEFAULT_TUPLES)


def test_committed_tuples_differ_as_specified(committed, word_pairs: WordPairs) -> None:
    words = [t for t in committed if t.task == "word"]
    assert len(words) >= 200
    for t in words:
        assert len(set(t.sentences)) == 4
        (w1, w2), (w3, w4) = t.pairs
        assert (w1, w2) != (w3, w4)
        assert word_pairs.category[(w1, w2)] == word_pairs.category[(w3, w4)] == t.category
        for (a, b), (x, y), extra in zip(((0, 1), (2, 3)), t.pairs, t.extra, strict=True):
            assert _check_pair(t.sentences[a], t.sentences[b], x, y) == extra, t.id
    uses = Counter(tuple(p) for t in words for p in t.pairs)
    config = json.loads((DEFAULT_TUPLES.parent / "yelp_tuples.config.json").read_text())
    assert max(uses.values()) <= config["config"]["cap_per_pair"]


def test_committed_tuples_are_in_the_yelp_pool(committed, shared_data: Path) -> None:
    pool = set(load_yelp(shared_data))
    words = [s for t in committed if t.task == "word" for s in t.sentences]
    assert all(s in pool for s in words)
    sentiment = [t for t in committed if t.task == SENTIMENT]
    assert len(sentiment) >= 400
    rewrites = set(load_rewrites(shared_data))
    for t in sentiment:  # (negative, positive), (negative, positive)
        assert (t.sentences[0], t.sentences[1]) in rewrites
        assert (t.sentences[2], t.sentences[3]) in rewrites


def test_normalise_matches_the_yelp_tokenisation() -> None:
    assert normalise("I'm sure it didn't taste GREAT... at all!") == \
        "i 'm sure it did n't taste great ... at all !"


# --- determinism --------------------------------------------------------------------------

SCRIPT = """
import json, sys
from qtsearch.evaluation.analogy.build import word_tuples, read_tuples, DEFAULT_TUPLES
from qtsearch.evaluation.analogy.categories import load_word_pairs
from qtsearch.evaluation.analogy.data import load_yelp, unique
from qtsearch.evaluation.analogy.mining import mine_pairs
data = sys.argv[1]
from pathlib import Path
tuples = read_tuples(DEFAULT_TUPLES)
sentences = unique([*(s for t in tuples if t.task == "word" for s in t.sentences),
                    *load_yelp(Path(data))[:4000]])
wp = load_word_pairs(Path(data) / "analogy")
pairs = mine_pairs(sentences, set(wp.category))
out = word_tuples(sentences, pairs, wp, cap_per_pair=10, seed=0)
print(json.dumps([[t.category, t.pairs, t.sentences] for t in out]))
"""


@pytest.mark.slow
def test_construction_is_deterministic_across_hash_seeds(shared_data: Path) -> None:
    """Mining hashes word sequences; Python's string hash changes per process (PYTHONHASHSEED)."""
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", SCRIPT, str(shared_data)], env=env,
                              capture_output=True, text=True, check=True, timeout=300)
        outputs.append(proc.stdout)
    assert outputs[0] == outputs[1]
    assert len(json.loads(outputs[0])) >= 50


def test_sentiment_tuples_are_seeded() -> None:
    pairs = [(f"bad {i} .", f"good {i} .") for i in range(20)]
    one, two = sentiment_tuples(pairs, seed=0), sentiment_tuples(list(reversed(pairs)), seed=0)
    assert [t.sentences for t in one] == [t.sentences for t in two]
    assert len(one) == 10
    assert all(t.sentences[0].startswith("bad") and t.sentences[3].startswith("good") for t in one)
    assert [t.sentences for t in sentiment_tuples(pairs, seed=1)] != [t.sentences for t in one]


def test_write_and_read_round_trip(tmp_path: Path, word_pairs: WordPairs) -> None:
    sentences = ["he is a great chef here .", "she is a great chef here .",
                 "he was very nice to us .", "she was very nice to us .",
                 "his food is so good .", "her food is so good ."]
    pairs = mine_pairs(sentences, set(word_pairs.category))
    tuples = word_tuples(sentences, pairs, word_pairs, cap_per_pair=5, seed=0)
    assert {tuple(map(tuple, t.pairs)) for t in tuples} <= {
        (("he", "she"), ("his", "her")), (("his", "her"), ("he", "she"))}
    config = BuildConfig(out=str(tmp_path / "t.jsonl"))
    write_tuples(BuildResult(tuples, len(pairs), 2), config)
    assert [t.sentences for t in read_tuples(tmp_path / "t.jsonl")] == [t.sentences
                                                                       for t in tuples]
    assert json.loads((tmp_path / "t.config.json").read_text())["config"]["seed"] == 0
    (tmp_path / "bad.jsonl").write_text('{"id": 1}\n')
    with pytest.raises(InputError):
        read_tuples(tmp_path / "bad.jsonl")
    with pytest.raises(InputError):
        read_tuples(tmp_path / "missing.jsonl")
