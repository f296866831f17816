"""Client input never breaks the server: every request a client can make, however odd its text,
numbers or JSON types, is answered 2xx or 4xx, never 500, and nothing it does outlives it (a
normal query afterwards gets the answer the CLI gives). Against a real server, warmed up so
that the lexical leg stems every new word on its shared in-memory table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_fixtures import serving

from qtsearch.app.cli import main

#: Characters NFKC expands many-fold (U+FDFA: 18 characters) or that fold oddly.
EXPANDING = ["\ufdfa", "\ufdfb", "\u0390", "\ufb03", "\u1e9e", "\U0001d518", "\u3300", "\u2474"]
#: Words not in the Austen index: each stemmed anew on the server's shared table.
NEW_WORDS = "who is it quixotic zanzibar"
FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def client(flat: Path):
    with serving(flat, warmed=True) as url, httpx.Client(base_url=url, timeout=120) as c:
        yield c


def lexical_cli(capsys, flat: Path, query: str) -> object:
    with pytest.raises(SystemExit) as exit_:
        main(["search", str(flat), query, "-k", "5", "--mode", "lexical", "--json"])
    assert exit_.value.code in (0, None)
    return json.loads(capsys.readouterr().out)


def post(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    """POST `body` as JSON: lone surrogates travel as \\ud800 escapes, as a client sends them."""
    return client.post(path, content=json.dumps(body).encode("ascii"),
                       headers={"Content-Type": "application/json"})


def not_500(r: httpx.Response) -> None:
    """2xx or 4xx, a 4xx saying why: {"error": …}, or the answers of a search one of whose
    queries failed (each failed one with its error)."""
    assert 200 <= r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code >= 400:
        body = r.json()
        assert list(body) == ["error"] if isinstance(body, dict) else \
            any(a["error"] for a in body), r.text[:500]


def still_answers(client: httpx.Client, capsys, flat: Path) -> None:
    """A query of new words after the requests: answered as the CLI answers it."""
    r = client.get("/search", params={"q": NEW_WORDS, "k": 5, "mode": "lexical"})
    assert r.status_code == 200, r.text
    assert r.json() == lexical_cli(capsys, flat, NEW_WORDS)


# -- the cases found, one by one ---------------------------------------------------------


def test_an_nfkc_expanding_word_leaves_lexical_search_whole(client, capsys, flat):
    """The tokenizer cuts a 20,000-character word inside a character: that word is counted
    by a lookup, and the shared table is left empty for the next request."""
    for _ in range(2):
        r = post(client, "/search", {"q": "\ufdfa" * 20000, "k": 5})
        assert r.status_code == 200, r.text
    still_answers(client, capsys, flat)


@pytest.mark.parametrize(("body", "where"), [
    ({"q": "Emma", "where": {"doc": 2**70}}, "doc"),
    ({"q": "Emma", "where": {"doc": -(2**63) - 1}}, "doc"),
    ({"q": "Emma", "where": {"source": 2**70}}, "source"),
    ({"q": "Emma", "where": ["doc=99999999999999999999999"]}, "doc"),
])
def test_numbers_sqlite_cannot_hold_are_refused(client, body, where):
    r = post(client, "/search", body)
    assert r.status_code == 400, r.text
    assert where in r.json()["error"]


@pytest.mark.parametrize("body", [
    {"q": "Emma \ud800 was happy"},
    {"q": ["Emma", "\udfff"]},
    {"q": "Emma", "where": {"source": "\ud800"}},
    {"q": "Emma", "mode": "\ud800"},
])
def test_lone_surrogates_are_refused(client, capsys, flat, body):
    r = post(client, "/search", body)
    assert r.status_code == 400, r.text
    assert "surrogate" in r.json()["error"]
    still_answers(client, capsys, flat)


@pytest.mark.parametrize("body", [
    {"q": None}, {"q": {"a": 1}}, {"q": 1.5}, {"q": [[1]]}, {"q": True}, {"q": []},
    {"q": "Emma", "k": "five"}, {"q": "Emma", "k": None}, {"q": "Emma", "k": 2**70},
    {"q": "Emma", "k": 1e308}, {"q": "Emma", "k": -1}, {"q": "Emma", "k": True},
    {"q": "Emma", "mode": 3}, {"q": "Emma", "mode": "fuzzy"}, {"q": "Emma", "mode": []},
    {"q": "Emma", "where": "doc=1"}, {"q": "Emma", "where": 5}, {"q": "Emma", "where": [5]},
    {"q": "Emma", "where": {"doc": None}}, {"q": "Emma", "where": {"doc": [1]}},
    {"q": "Emma", "where": {"doc": "x"}}, {"q": "Emma", "where": {"nope": 1}},
    {"q": "Emma", "where": ["="]}, {"q": "Emma", "by": 7}, {"q": "Emma", "by": "page"},
    {"q": 2**70, "ids": True}, {"q": -1, "ids": True}, {"q": "x", "ids": True},
    [], "Emma", 5, None,
])
def test_odd_json_types_are_refused_or_answered(client, body):
    not_500(post(client, "/search", body))


def test_numbers_in_paths_and_parameters(client):
    for path in ("/sentences/36893488147419103232", "/sentences/-36893488147419103232",
                 "/sentences/1?context=36893488147419103232", "/sentences/1?context=-5",
                 "/search?q=Emma&k=36893488147419103232", "/search?q=Emma&where=doc=" + "9" * 30,
                 "/search?q=36893488147419103232&ids=true"):
        not_500(client.get(path))


# -- the fuzz ------------------------------------------------------------------------------

_expanding = st.builds(lambda c, n: c * n, st.sampled_from(EXPANDING), st.integers(1, 20000))
_any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
_long_word = st.builds(lambda c, n: c * n, st.characters(codec=None, exclude_categories=()),
                       st.integers(1000, 20000))
_surrogates = st.sampled_from(["\ud800", "Emma \udfff", "\udcff\udcfe"])
TEXT = st.one_of(_surrogates, _any_text, _expanding, _long_word,
                 st.lists(st.one_of(_any_text, _expanding, _surrogates), max_size=4).map(" ".join))
NUMBER = st.one_of(st.sampled_from([0, -1, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**64,
                                    2**70, 1e308, 0.5]),
                   st.integers(), st.integers(-(2**80), 2**80), st.floats(allow_nan=False))
JSON = st.recursive(st.none() | st.booleans() | NUMBER | TEXT,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)
WHERE = st.one_of(JSON, st.dictionaries(st.sampled_from(["doc", "source", "line", "id",
                                                         "position", "text", "title"]),
                                        st.one_of(NUMBER, TEXT), max_size=3),
                  st.lists(st.builds("{}={}".format, st.sampled_from(["doc", "source", "x"]),
                                     st.one_of(NUMBER, TEXT)), max_size=3))
SEARCH = st.fixed_dictionaries(
    {"q": st.one_of(TEXT, NUMBER, JSON, st.lists(st.one_of(TEXT, NUMBER), max_size=3))},
    optional={"k": st.one_of(NUMBER, JSON, st.integers(1, 50)), "where": WHERE,
              "mode": st.one_of(st.sampled_from(["hybrid", "semantic", "lexical"]), JSON),
              "by": st.one_of(st.sampled_from(["passage", "doc"]), JSON),
              "ids": st.one_of(st.booleans(), JSON)})


@FUZZ
@given(body=SEARCH)
def test_fuzzed_searches_are_never_a_server_failure(client, body):
    not_500(post(client, "/search", body))


@FUZZ
@given(a=st.one_of(TEXT, JSON), b=TEXT, c=st.one_of(TEXT, NUMBER), k=st.one_of(NUMBER, JSON))
def test_fuzzed_analogies_are_never_a_server_failure(client, a, b, c, k):
    not_500(post(client, "/analogy", {"a": a, "b": b, "c": c, "k": k}))


@FUZZ
@given(raw=st.binary(max_size=60), key=st.sampled_from(["q", "k", "where", "mode", "by",
                                                        "ids", "context"]))
def test_fuzzed_query_strings_are_never_a_server_failure(client, raw, key):
    """Any bytes, percent-encoded, as a parameter of GET /search (invalid UTF-8 included)."""
    value = "".join(f"%{b:02X}" for b in raw)
    not_500(client.get(f"/search?q=Emma&{key}={value}"))
    not_500(client.get(f"/sentences/1?context={value}"))


def test_after_the_fuzz_a_normal_query_answers_as_before(client, capsys, flat):
    """Runs after the fuzz above (pytest keeps the order of a file)."""
    still_answers(client, capsys, flat)
