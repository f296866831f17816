"""Searches waiting for a worker's thread are merged into one batch (qtsearch.app.serve.merging),
and each request still gets the answer it would have got alone."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from serve_fixtures import serving

import qtsearch
from qtsearch.app.serve.merging import Ask, Merger
from qtsearch.core.budget import Budget, spending
from qtsearch.lifecycle.answers import answer_queries

httpx = pytest.importorskip("httpx")


def _ask(query: str, k: int = 5) -> Ask:
    return Ask(query, k, None, (), "passage", False)


def test_alike_searches_waiting_for_a_thread_go_together():
    """With its one thread busy, the searches that came meanwhile wait; when it is free, the
    first and the alike ones after it (same k, mode, filter, unit) go together, at most `most`
    at a time, then the next; a request cancelled while it waited is not searched; a failure
    reaches every request of its part. A part's requests have their answers before the next
    part is searched."""
    batches: list[list[str]] = []
    release, a1_answered = threading.Event(), threading.Event()
    answered_early: list[bool] = []

    def answer(asks: list[Ask]) -> list[Any]:
        batches.append([a.query for a in asks])
        if asks[0].query == "first":
            release.wait(10)
        if asks[0].query == "k3":  # the part after a1's
            answered_early.append(a1_answered.wait(10))
        if asks[0].query == "broken":
            raise RuntimeError("broken search")
        return [f"answer to {a.query}" for a in asks]

    async def run() -> list[Any]:
        merger = Merger(answer, slots=1, most=3)
        first = asyncio.ensure_future(merger.answer(_ask("first")))
        await asyncio.sleep(0.1)  # the thread is busy with "first"
        waiting = [asyncio.ensure_future(merger.answer(a)) for a in [
            _ask("a1"), _ask("k3", k=3), _ask("a2"), _ask("gone"), _ask("a3"), _ask("a4")]]
        waiting[0].add_done_callback(lambda _: a1_answered.set())
        await asyncio.sleep(0.05)
        waiting[3].cancel()
        release.set()
        outcomes = await asyncio.gather(first, *waiting, return_exceptions=True)
        broken = await asyncio.gather(merger.answer(_ask("broken")), return_exceptions=True)
        return [*outcomes, *broken]

    outcomes = asyncio.run(run())
    assert batches == [["first"], ["a1", "a2", "a3"], ["k3"], ["a4"], ["broken"]]
    assert answered_early == [True]
    assert outcomes[:4] == ["answer to first", "answer to a1", "answer to k3", "answer to a2"]
    assert isinstance(outcomes[4], asyncio.CancelledError)
    assert outcomes[5:7] == ["answer to a3", "answer to a4"]
    assert isinstance(outcomes[7], RuntimeError) and str(outcomes[7]) == "broken search"


def _spy_batches(monkeypatch) -> list[tuple[int, str]]:
    """Each `Index.search_many` call (the real one runs): its number of queries, and the name
    of what it raised ("" when it answered)."""
    calls: list[tuple[int, str]] = []
    search_many = qtsearch.Index.search_many

    def spy(self, queries, *args, **kwargs):
        try:
            found = search_many(self, queries, *args, **kwargs)
        except Exception as e:
            calls.append((len(queries), type(e).__name__))
            raise
        calls.append((len(queries), ""))
        return found

    monkeypatch.setattr(qtsearch.Index, "search_many", spy)
    return calls


def _all_at_once(url: str, requests: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """Every request sent at once, each from a thread of its own: (status, JSON) each."""
    def send(params: dict[str, Any]) -> tuple[int, Any]:
        with httpx.Client(base_url=url, timeout=120) as c:
            r = c.get("/search", params=params)
            return r.status_code, r.json()

    with ThreadPoolExecutor(len(requests)) as pool:
        return list(pool.map(send, requests))


def _one_by_one(url: str, requests: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    with httpx.Client(base_url=url, timeout=120) as c:
        return [(r.status_code, r.json()) for r in (c.get("/search", params=p)
                                                    for p in requests)]


def test_merged_requests_answer_as_each_alone(flat, monkeypatch):
    """40 requests at once to a worker with one thread: different queries, k, modes, filters
    and units, some explained, one whose words the model does not know (semantic: 400, which
    sends the rest of its batch to be answered one by one). Merged, each answers what it
    answers sent alone."""
    queries = ["She was very happy to see him again.", "Mr. Knightley said nothing.",
               "The weather was cold and wet all week.", "a letter from Jane Fairfax"]
    requests: list[dict[str, Any]] = []
    for n in range(40):
        params: dict[str, Any] = {"q": queries[n % 4], "k": 3 + n % 2}
        if n % 5 == 1:
            params["mode"] = "semantic"
        if n % 7 == 2:
            params["explain"] = "true"
        if n % 9 == 3:
            params["by"] = "doc"
        if n % 11 == 4:
            params["where"] = "doc=0"
        requests.append(params)
    requests[11] = {"q": "zqxv wkrp", "mode": "semantic", "k": 4}
    with serving(flat, threads=1) as url:
        calls = _spy_batches(monkeypatch)
        together = _all_at_once(url, requests)
        merged = max(n for n, _ in calls)
        monkeypatch.undo()
        alone = _one_by_one(url, requests)
    assert merged > 1
    assert together == alone
    assert together[11][0] == 400 and "vocabulary" in together[11][1][0]["error"]
    assert sum(status == 200 for status, _ in together) == 39


def test_a_batch_over_the_read_budget_is_answered_request_by_request(flat, monkeypatch):
    """The read budget allows a request what the most reading of twelve queries reads alone:
    a batch of them reads more, so each of its requests is searched again alone, within the
    budget, and answered as alone."""
    queries = [f"She was very happy to see {who} again." for who in (
        "him", "her", "Emma", "Harriet", "Jane", "Mr. Knightley", "Mrs. Weston", "Frank",
        "her father", "her sister", "Mr. Elton", "Miss Bates")]
    with qtsearch.Index.open(flat) as index:
        reads = []
        for q in queries:
            with spending(Budget()) as read:
                answer_queries(index, [q], 5)
            reads.append(read.read)
    requests = [{"q": q, "k": 5} for q in queries]
    with serving(flat, threads=1, max_read_chars=max(reads)) as url:
        calls = _spy_batches(monkeypatch)
        together = _all_at_once(url, requests)
        monkeypatch.undo()
        alone = _one_by_one(url, requests)
    assert any(n > 1 and raised == "OverBudget" for n, raised in calls)
    assert together == alone
    assert all(status == 200 for status, _ in together)


def test_a_query_that_breaks_the_search_fails_alone(flat, monkeypatch):
    """A search failing with a bug (here injected: any call holding one query raises) fails
    its batch; the batch's other requests are searched again alone and answered, and only
    the query's own request gets the 500."""
    poison = "Mr. Knightley said nothing."
    search_many = qtsearch.Index.search_many

    def broken(self, queries, *args, **kwargs):
        if poison in queries:
            raise RuntimeError("a bug this query meets")
        return search_many(self, queries, *args, **kwargs)

    queries = [f"She was very happy to see {who} again." for who in (
        "him", "her", "Emma", "Harriet", "Jane", "Frank", "Mr. Elton", "Miss Bates")]
    requests = [{"q": q, "k": 5} for q in [*queries[:4], poison, *queries[4:]] * 2]
    with serving(flat, threads=1) as url:
        alone = _one_by_one(url, requests)
        monkeypatch.setattr(qtsearch.Index, "search_many", broken)
        calls = _spy_batches(monkeypatch)
        together = _all_at_once(url, requests)
    assert any(n > 1 and raised == "RuntimeError" for n, raised in calls)
    for params, (status, body), (alone_status, alone_body) in zip(requests, together, alone,
                                                                   strict=True):
        if params["q"] == poison:
            assert status == 500
            assert body == {"error": "internal error: RuntimeError: a bug this query meets"}
        else:
            assert (status, body) == (alone_status, alone_body) and status == 200
