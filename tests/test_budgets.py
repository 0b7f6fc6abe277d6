"""Budgets (docs/budgets.md): the price table, a task's max_cost and token budgets, the day's cap, on_budget.

The scripted model counts 20 output tokens per output item; at 50,000 per million output tokens (and
input free) each of its one-item answers costs exactly $1.00, so every line falls on a known answer.
"""

from __future__ import annotations

from typing import Any

from tests.support.daemon import Daemon, cuctl, scenario

#: Four answers: three screenshots and the final message, $1.00 each.
FOUR_ANSWERS = scenario({"actions": [{"type": "screenshot"}]}, {"actions": [{"type": "screenshot"}]},
                        {"message": "done"})
PRICES = """
[budget.prices."gpt-5.4"]
input = 0
cached_input = 0
output = 50_000
"""


def kinds(daemon: Daemon, task_id: int, *wanted: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["kind"], e["data"]) for e in daemon.events(task_id) if e["kind"] in wanted]


def test_ask_at_the_line_approve_extends_deny_ends_and_no_price_is_unknown(start_daemon) -> None:
    daemon = start_daemon(FOUR_ANSWERS, config=PRICES)
    task_id = daemon.call("submit", prompt="look", max_cost="2")["id"]
    approval = daemon.wait_approval(task_id)
    assert approval["kind"] == "budget" and approval["actions"] == []
    assert approval["checks"][0]["message"] == f"task {task_id} has spent $2.00 of $2.00; approve to allow another $2.00"
    shown = daemon.task(task_id)
    assert shown["state"] == "awaiting_approval" and shown["cost"] == {"amount": "2", "currency": "USD", "unknown": None}
    text = cuctl(daemon.socket, "show", str(task_id)).stdout
    assert "cost:          $2.00" in text and "budgets:       $2.00" in text
    daemon.call("approve", id=approval["id"])
    done = daemon.wait_state(task_id, "succeeded")
    assert done["cost"]["amount"] == "4" and done["max_cost"] == "4"
    budget = kinds(daemon, task_id, "budget_warning", "budget_reached", "budget_extended")
    assert [(k, d["budget"], d["step"]) for k, d in budget] == [
        ("budget_warning", "max_cost", 2), ("budget_reached", "max_cost", 2), ("budget_extended", "max_cost", 2),
        ("budget_warning", "max_cost", 4)]  # 80% of the new $4.00 line: the 4th answer, which was the last
    assert budget[0][1]["used"] == "2" and budget[0][1]["limit"] == "2" and budget[2][1]["limit"] == "4"
    steps = [d for k, d in kinds(daemon, task_id, "step")]
    assert [s["cost"]["amount"] for s in steps] == ["1", "1", "1", "1"]
    assert steps[-1]["total_cost"]["amount"] == "4"

    denied = daemon.call("submit", prompt="look", max_cost=1)["id"]
    approval = daemon.wait_approval(denied)
    assert cuctl(daemon.socket, "deny", str(approval["id"]), "--reason", "enough").returncode == 0
    ended = daemon.wait_state(denied, "budget_exceeded")
    assert ended["error"]["kind"] == "budget_exceeded"
    assert ended["error"]["message"] == (f"task {denied} has spent $1.00 of $1.00; approval {approval['id']} for "
                                         "more was denied by root (uid 0): enough")
    assert len(daemon.model.requests) == 4 + 1  # the denied task's second request never went out

    free = daemon.call("submit", prompt="look", model="unpriced")["id"]
    unknown = daemon.wait_state(free, "succeeded")["cost"]
    assert unknown == {"amount": None, "currency": "USD", "unknown": "no price for model 'unpriced'"}
    assert "cost:          unknown (no price for model 'unpriced')" in cuctl(daemon.socket, "show", str(free)).stdout
    refused = cuctl(daemon.socket, "submit", "--model", "unpriced", "--max-cost", "1", "look")
    assert refused.returncode == 2
    assert "'submit' field 'max_cost' needs a price for model 'unpriced'" in refused.stderr
