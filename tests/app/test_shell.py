"""`qtsearch shell` driven through a pseudo-terminal, as a person would use it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest
from shell_helpers import PROMPT, START_TIMEOUT, ask, leave, spawn


@pytest.mark.slow
def test_a_session(flat, api, tmp_path):
    history = tmp_path / "hist"
    child = spawn(flat, history, "-k", "4")

    query = "She was very happy to see him again."
    shown = ask(child, query)
    top = api.search([query], k=4)[0]
    assert "4 results in" in shown
    assert all(f" {h.id} " in shown for h in top) and f"{top[0].score:.3f}" in shown

    assert "k = 2" in ask(child, ":k 2")
    assert "2 results in" in ask(child, query)

    a, b, c = (r.text for r in api.get([100, 200, 1300]))
    shown = ask(child, f":analogy {a} | {b} | {c}")
    expected = api.analogy(a, b, c, k=2)
    assert "2 results in" in shown and all(f" {h.id} " in shown for h in expected)

    hit = top[0]
    shown = ask(child, f":ctx {hit.id}")
    passage = api.context(hit.id)
    assert f"document {hit.doc}" in shown
    assert all(f" {r.id} " in shown for r in passage)
    assert f"neighbours of 1200: {api.get([1200])[0].text[:30]}" in ask(child, ":id 1200")

    help_text = ask(child, ":help")
    assert ":analogy A | B | C" in help_text and str(history) in help_text

    # mistakes print one line and the shell goes on
    shown = ask(child, "Qwxzv Blorptangle")  # hybrid: said so, searched by its words only
    assert "unknown to the model" in shown and "0 results in" in shown
    assert "error:" in ask(child, "   :k")
    assert "unknown command" in ask(child, ":frobnicate")
    assert "usage: :k N" in ask(child, ":k many")
    assert "usage: :analogy" in ask(child, ":analogy only | two")
    assert "no sentence with id" in ask(child, ":ctx 999999")

    # Ctrl-C cancels the line being typed; the shell is still there and answers
    child.send("half a sentence that is never")
    child.expect_exact("never")  # readline has the line: the interrupt cancels that line
    child.sendintr()
    child.expect_exact(PROMPT)
    assert "2 results in" in ask(child, query)

    # Ctrl-D leaves with status 0 and the history is written
    leave(child)
    lines = history.read_text(encoding="utf-8").splitlines()
    assert query in lines and ":k 2" in lines and "half a sentence that is never" not in lines


@pytest.mark.slow
def test_modes_and_filters(flat, api, tmp_path):
    child = spawn(flat, tmp_path / "hist", "-k", "3", "--mode", "lexical")
    query = "Emma walked to Hartfield with Harriet."
    want = api.search(query, k=3, mode="lexical")[0]
    assert all(f" {h.id} " in ask(child, query) for h in want)
    assert "mode = semantic" in ask(child, ":mode semantic")
    assert "explain: on" in ask(child, ":explain")
    shown = ask(child, query)
    assert "why" in shown and "score = the cosine" in shown and "query terms: emma" in shown
    assert "explain: off" in ask(child, ":explain")
    centre = want[0].id
    marked = [line for line in ask(child, f":ctx {centre}").splitlines() if "▶" in line]
    assert len(marked) == 1 and f" {centre} " in marked[0]
    assert "where: doc=1" in ask(child, ":where doc=1")
    shown = ask(child, query)
    assert all(f" {h.id} " in shown
               for h in api.search(query, k=3, mode="semantic", where={"doc": 1})[0])
    assert "cannot filter on" in ask(child, ":where colour=red")
    assert "usage: :mode" in ask(child, ":mode fuzzy")
    assert "where: no filter" in ask(child, ":where")
    assert "semantic search" in ask(child, ":help")
    leave(child)


@pytest.mark.slow
def test_history_is_recalled_in_the_next_session(flat, tmp_path):
    history = tmp_path / "hist"
    child = spawn(flat, history)
    assert "k = 3" in ask(child, ":k 3")
    child.sendline(":quit")  # the last line of history is now ":quit", the one before ":k 3"
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    child = spawn(flat, history)
    child.sendcontrol("p")  # previous-history, twice: back past ":quit" to ":k 3"
    child.sendcontrol("p")
    child.sendline("")
    child.expect_exact("k = 3")
    # Ctrl-D typed before readline has the terminal again is read as a plain byte and lost
    child.expect_exact(PROMPT)
    leave(child)


def test_a_missing_index_fails_before_the_prompt(tmp_path):
    env = {**os.environ, "QTSEARCH_HISTORY": str(tmp_path / "hist"), "TERM": "dumb"}
    child = pexpect.spawn(str(Path(sys.executable).with_name("qtsearch")),
                          ["shell", str(tmp_path / "nope")], env=env, encoding="utf-8",
                          timeout=START_TIMEOUT)
    child.expect("no such index folder")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 5
    assert "Traceback" not in child.before
