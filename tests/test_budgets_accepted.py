"""A task's money lines are counted by the price it was accepted with (daemon/budget/accepted.py, issue 41 item 8).

The config may lose a model's price while a task of that model waits in the queue; a real daemon is
stopped and started again into such a config. As in tests/test_budgets.py, the scripted model counts
20 output tokens per answer, and at 50,000 per million output tokens each answer costs exactly $1.00.
"""

from __future__ import annotations

import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cud.daemon.budget.accepted import Accepted, at_submit, counted_by
from cud.daemon.budget.config import Price, load_budget
from cud.errors import ConfigError
from tests.support.daemon import cuctl, scenario
from tests.support.recorder import wait_until
from tests.test_budgets import FOUR_ANSWERS, PRICES

DATA = Path(__file__).parent / "data"
#: The first task holds the one seat (its second answer never comes while the test runs), so the next waits queued.
SLOW = scenario({"actions": [{"type": "wait"}], "delay": 3600}, {"message": "done"})
FAIL = '[budget]\non_budget = "fail"\n'


def test_a_queued_task_keeps_its_price_through_a_restart_into_a_config_without_it(start_daemon) -> None:
    before = start_daemon(SLOW, config=FAIL + PRICES)
    blocker = before.call("submit", prompt="hold the seat")["id"]
    wait_until(lambda: any("previous_response_id" in r for r in before.model.requests), 30, "the first task mid-run")
    kept = before.call("submit", prompt="look", max_cost="2")
    assert kept["task"]["state"] == "queued"
    shown = cuctl(before.socket, "show", str(kept["id"])).stdout  # before its first answer: the kept currency
    assert "budgets:       $2.00\n" in shown
    assert "price:         $0.00 input, $0.00 cached input, $50,000.00 output, per million tokens" in shown
    assert before.stop() == 0

    # The same state directory; the config has no price for the model any more.
    after = start_daemon(FOUR_ANSWERS, config=FAIL, workdir=before.dir)
    assert after.task(blocker)["state"] == "interrupted"
    ended = after.wait_state(kept["id"], "budget_exceeded", "succeeded", "failed")
    assert ended["state"] == "budget_exceeded", ended
    assert ended["error"]["details"] == {"budget": "max_cost", "limit": "2", "used": "2"}
    assert ended["cost"] == {"amount": "2", "currency": "USD", "unknown": None}
    assert len(after.model.requests) == 2  # the third request, past the line, never went out
    assert ended["price"] == {"currency": "USD", "input": "0", "cached_input": "0", "output": "50000"}
    # A task of that model with no money line is not refused: its cost is unknown, as before.
    free = after.call("submit", prompt="look")
    assert after.wait_state(free["id"], "succeeded")["cost"]["unknown"] == "no price for model 'gpt-5.4'"


def test_a_task_from_before_kept_prices_is_refused_at_start_where_nothing_prices_its_max_cost(
        short_tmp: Path, start_daemon) -> None:
    state = short_tmp / "state"
    state.mkdir(mode=0o700)
    # Task 2 there is queued with a max_cost of 2 and, from before the price was kept, no price.
    shutil.copy(DATA / "cud-v11-budgets.sqlite3", state / "cud.sqlite3")
    os.chmod(state / "cud.sqlite3", 0o600)
    daemon = start_daemon(FOUR_ANSWERS, config=FAIL, workdir=short_tmp)
    ended = daemon.wait_state(2, "failed", "succeeded", "budget_exceeded")
    assert ended["state"] == "failed", ended
    assert ended["error"]["kind"] == "config"
    assert ended["error"]["message"] == (
        "task 2 was not started: its max_cost needs a price for model 'gpt-5.4'; the task has none stored (it was "
        "accepted before cud kept a task's price) and the daemon's [budget.prices] has none now, so its cost could "
        "not be counted")
    assert ended["error"]["details"]["model"] == "gpt-5.4" and ended["price"] is None
    assert daemon.model.requests == []  # refused before its first request
    assert [e["kind"] for e in daemon.events(2)][-2:] == ["running", "end"]


def _task(price: dict[str, str] | None, max_cost: str | None = "2") -> Any:
    return {"id": 7, "model": "gpt-x", "max_cost": max_cost, "price": price}


def test_the_accepted_price_wins_and_what_cannot_be_counted_is_refused_by_name() -> None:
    """counted_by, the one rule: the stored price over the config's; none where a line needs one refused."""
    usd = {"currency": "USD", "input": "1", "cached_input": "0.5", "output": "4"}
    configured = load_budget({"currency": "USD", "prices": {"gpt-x": {"input": 9, "output": 9}}})
    assert at_submit(configured, "gpt-x") == {"currency": "USD", "input": "9", "cached_input": "9", "output": "9"}
    assert at_submit(configured, "other") is None
    kept = counted_by(_task(usd), configured)
    assert kept == Accepted(Price(Decimal(1), Decimal("0.5"), Decimal(4)), "USD")  # not the config's 9s
    assert counted_by(_task(None), configured) == Accepted(Price(Decimal(9), Decimal(9), Decimal(9)), "USD")
    bare = load_budget({})
    assert counted_by(_task(None, max_cost=None), bare) is None  # no line: the cost is merely unknown
    with pytest.raises(ConfigError, match=r"task 7 was not started: its max_cost needs a price for model 'gpt-x'"):
        counted_by(_task(None), bare)
    capped = load_budget({"daily_cost": 5})
    with pytest.raises(ConfigError, match=r"the daemon's \[budget\] daily_cost needs a price for model 'gpt-x'"):
        counted_by(_task(None, max_cost=None), capped)
    # A price in another currency than the day's cap cannot be counted against it; without a cap it counts in its own.
    euros = load_budget({"currency": "EUR", "daily_cost": 5})
    with pytest.raises(ConfigError, match=r"accepted with prices in USD, and the day's cap \(\[budget\] daily_cost\) "
                                          r"is in EUR now"):
        counted_by(_task(usd), euros)
    assert counted_by(_task(usd), load_budget({"currency": "EUR"})).currency == "USD"  # type: ignore[union-attr]
