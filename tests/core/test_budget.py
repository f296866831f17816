"""qtsearch.core.budget: what one request may still read and how long it may run, checked by
the store before it reads rows (here on a real index)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import GRID_SENTENCES

import qtsearch
from qtsearch.core import budget
from qtsearch.core.budget import SEARCH_ADVICE, Budget, OverBudget, OverTime, spending
from qtsearch.core.errors import QTSearchError


def test_no_bounds_charges_anything() -> None:
    b = Budget()
    b.charge(10**12)
    b.check_time()
    assert b.read == 10**12 and b.deadline is None


def test_charges_add_up_to_the_limit_and_a_refused_one_charges_nothing() -> None:
    b = Budget(chars=100)
    b.charge(60)
    b.charge(40)
    assert b.read == 100
    with pytest.raises(OverBudget) as e:
        b.charge(1)
    assert str(e.value) == ("request would read 101 characters of stored text: at most 100 "
                            f"({SEARCH_ADVICE})")
    assert b.read == 100  # nothing charged
    assert isinstance(e.value, QTSearchError)


def test_the_advice_and_thousands_in_the_message() -> None:
    b = Budget(chars=1_000_000, advice="ask for a shorter list")
    with pytest.raises(OverBudget, match=r"read 1,500,000 characters .* at most 1,000,000 "
                                         r"\(ask for a shorter list\)"):
        b.charge(1_500_000)


def test_past_the_deadline_time_runs_out() -> None:
    b = Budget(seconds=0.01)
    b.check_time()  # at once: within it
    time.sleep(0.03)
    with pytest.raises(OverTime, match=rf"still working after 0.01 s: retry later, or "
                                       rf"{SEARCH_ADVICE}"):
        b.check_time()
    with pytest.raises(OverTime):  # a charge checks the time first
        b.charge(0)
    assert b.read == 0


def test_spending_sets_the_current_budget_for_the_block_and_this_thread() -> None:
    assert budget.current() is None
    seen_elsewhere = []
    b = Budget(chars=5)
    with spending(b) as inside:
        assert inside is b and budget.current() is b
        thread = threading.Thread(target=lambda: seen_elsewhere.append(budget.current()))
        thread.start()
        thread.join()
        with spending(Budget()) as nested:
            assert budget.current() is nested
        assert budget.current() is b
    assert budget.current() is None and seen_elsewhere == [None]
    with pytest.raises(RuntimeError), spending(b):
        raise RuntimeError("the block fails")
    assert budget.current() is None  # reset even so


def test_the_store_charges_a_search_against_the_budget(shipped_index: Path) -> None:
    with qtsearch.Index.open(shipped_index) as index:
        free = index.search("a pot of soup", k=3, mode="semantic")  # no budget outside
        with spending(Budget(chars=10**6)) as b:
            again = index.search("a pot of soup", k=3, mode="semantic")
        assert [h.id for h in again] == [h.id for h in free]
        assert b.read >= sum(len(h.text) for h in again)
        with pytest.raises(OverBudget, match="at most 10 "), spending(Budget(chars=10)):
            index.search("a pot of soup", k=len(GRID_SENTENCES), mode="semantic")
