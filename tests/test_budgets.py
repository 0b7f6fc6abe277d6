"""Budgets (docs/budgets.md): the price table, a task's max_cost and token budgets, the day's cap, on_budget.

The scripted model counts 20 output tokens per output item; at 50,000 per million output tokens (and
input free) each of its one-item answers costs exactly $1.00, so every line falls on a known answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.receiver import Receiver
from tests.support.recorder import wait_until

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


def test_ask_at_the_line_approve_extends_deny_ends_and_no_price_is_unknown(start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon(FOUR_ANSWERS, config=PRICES)
    task_id = daemon.call("submit", prompt="look", max_cost="2")["id"]
    approval = daemon.wait_approval(task_id)
    assert approval["kind"] == "budget" and approval["actions"] == []
    assert approval["checks"][0]["message"] == (f"task {task_id} has spent $2.00 of $2.00; approve to allow another "
                                                "$2.00 (a line of $4.00)")
    shown = daemon.task(task_id)
    assert shown["state"] == "awaiting_approval" and shown["cost"] == {"amount": "2", "currency": "USD", "unknown": None}
    text = cuctl(daemon.socket, "show", str(task_id)).stdout
    assert "cost:          $2.00" in text and "budgets:       $2.00" in text
    daemon.call("approve", id=approval["id"])
    done = daemon.wait_state(task_id, "succeeded")
    assert done["cost"]["amount"] == "4" and done["max_cost"] == "4"
    budget = kinds(daemon, task_id, "budget_warning", "budget_reached", "budget_extended", "step")
    # The 80% warning comes before the request that would cross 80%: after answer 1 ($1.00), the next
    # one, if it costs what the last did, takes $1.00 to $2.00, so it is sent before step 1's record
    # (written as request 2 goes out); so again under the new $4.00 line ($3.00 + $1.00 >= $3.20).
    assert [(k, d.get("budget", ""), d["step"]) for k, d in budget] == [
        ("budget_warning", "max_cost", 1), ("step", "", 1), ("budget_reached", "max_cost", 2),
        ("budget_extended", "max_cost", 2), ("step", "", 2), ("budget_warning", "max_cost", 3), ("step", "", 3),
        ("step", "", 4)]
    budget = [(k, d) for k, d in budget if k != "step"]
    assert budget[0][1]["used"] == "1" and budget[0][1]["limit"] == "2" and budget[0][1]["expected"] == "2"
    assert budget[0][1]["message"] == (f"task {task_id} has spent $1.00 of $2.00; its next request, if it uses what "
                                       "its last did ($1.00), takes it to $2.00")
    assert budget[2][1]["limit"] == "4"
    steps = [d for k, d in kinds(daemon, task_id, "step")]
    assert [s["cost"]["amount"] for s in steps] == ["1", "1", "1", "1"]
    assert steps[-1]["total_cost"]["amount"] == "4"
    # The spend where people read it: follow's step lines, the report, the export.
    followed = cuctl(daemon.socket, "follow", str(task_id)).stdout
    assert "cost $1.00, $2.00 so far" in followed and "cost $1.00, $4.00 so far" in followed
    assert f"at its budget (max_cost): task {task_id} has spent $2.00 of $2.00" in followed
    page = tmp_path / "report.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(page)).returncode == 0
    assert "<dt>Cost</dt><dd><span class=\"totals\">$4.00</span> (budgets: $4.00)" in page.read_text()
    assert cuctl(daemon.socket, "export", str(task_id), "-o", str(tmp_path / "export")).returncode == 0
    exported = json.loads((tmp_path / "export" / "task.json").read_text())
    assert exported["cost"] == done["cost"] and exported["max_cost"] == "4"

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


def test_an_approval_after_an_answer_far_over_the_line_extends_from_what_was_spent(start_daemon) -> None:
    # Two answers of $2.60 each (20 output tokens at $130,000 a million) on a $1.00 max_cost: a yes after
    # the first sets the line to $2.60 + $1.00, so the second request goes out, not a second question at once.
    daemon = start_daemon(scenario({"message": "done"}), config='[budget.prices."gpt-5.4"]\ninput = 0\noutput = 130_000\n')
    task_id = daemon.call("submit", prompt="look", max_cost="1")["id"]
    approval = daemon.wait_approval(task_id)
    assert approval["checks"][0]["message"] == (f"task {task_id} has spent $2.60 of $1.00; approve to allow another "
                                                "$1.00 (a line of $3.60)")
    assert len(daemon.model.requests) == 1
    daemon.call("approve", id=approval["id"])

    def next_thing() -> dict[str, Any] | None:  # the task's end, or another question
        asked = [a for a in daemon.call("approvals") if a["task_id"] == task_id and a["id"] != approval["id"]]
        task = daemon.task(task_id)
        return asked[0] if asked else (task if task["state"] == "succeeded" else None)

    after = wait_until(next_thing, 60, f"task {task_id} to end or ask again")
    assert after.get("state") == "succeeded", f"asked again with no model request between: {after}"
    assert len(daemon.model.requests) == 2 and after["max_cost"] == "3.6" and after["cost"]["amount"] == "5.2"
    extended = [d for k, d in kinds(daemon, task_id, "budget_extended")]
    assert [(d["limit"], d["used"]) for d in extended] == [("3.6", "2.6")]


def test_fail_at_the_line_and_the_day_cap_holds_a_new_task_back(start_daemon) -> None:
    receiver = Receiver({"/hook": "ok"}).start()
    try:
        config = f"""
max_cost = 1.25
[budget]
on_budget = "fail"
daily_cost = 3
{PRICES}
[[notify]]
name = "money"
webhook = "{receiver.url('/hook')}"
events = ["budget_warning"]
"""
        daemon = start_daemon(FOUR_ANSWERS, config=config)
        above = cuctl(daemon.socket, "submit", "--max-cost", "1.26", "look")
        assert above.returncode == 2 and ("'submit' field 'max_cost' is 1.26, above the daemon's limit of 1.25 (its "
                                          "config key 'max_cost')") in above.stderr
        by_cost = daemon.call("submit", prompt="look", max_cost="1.00")["id"]
        ended = daemon.wait_state(by_cost, "budget_exceeded")
        assert ended["error"]["message"] == (f"task {by_cost} has spent $1.00 of $1.00; the task was ended "
                                             "([budget] on_budget is \"fail\")")
        assert ended["error"]["details"] == {"budget": "max_cost", "limit": "1", "used": "1"}
        assert daemon.call("approvals") == [] and ended["steps"] == 1

        by_tokens = daemon.call("submit", prompt="look", max_output_tokens=20)["id"]
        assert daemon.task(by_tokens)["max_cost"] == "1.25"  # the config's max_cost is the default too
        ended = daemon.wait_state(by_tokens, "budget_exceeded")
        assert ended["error"]["message"].startswith(f"task {by_tokens} has used 20 output tokens of 20 output tokens")

        # $2.00 spent today: the third task's first answer takes the day to its $3.00 cap, which ends it
        # (the day's warning at 80%, $2.40, came with the same answer, as did its max_cost's: $1.00 is 80%
        # of $1.25 exactly, so a warning any later than 80% would be missed here).
        by_day = daemon.call("submit", prompt="look")["id"]
        ended = daemon.wait_state(by_day, "budget_exceeded")
        assert ended["error"]["details"]["budget"] == "daily_cost"
        warnings = [d for k, d in kinds(daemon, by_day, "budget_warning")]
        assert [(w["budget"], w["used"], w["limit"]) for w in warnings] == [("max_cost", "1", "1.25"),
                                                                            ("daily_cost", "3", "3")]
        # Each budget warned once at 80%: each task's max_cost, the output tokens, the day's cap.
        wait_until(lambda: len(receiver.on("/hook")) == 5, 30, "five budget_warning hooks")
        sent = sorted((hit.body["task"]["id"], hit.body["budget"]["budget"], hit.body["budget"].get("currency"))
                      for hit in receiver.on("/hook") if hit.body["event"] == "budget_warning")
        assert sent == [(by_cost, "max_cost", "USD"), (by_tokens, "max_cost", "USD"),
                        (by_tokens, "max_output_tokens", None), (by_day, "daily_cost", "USD"),
                        (by_day, "max_cost", "USD")]

        held = daemon.call("submit", prompt="look")["id"]
        task = _wait_held(daemon, held)
        assert task["state"] == "queued"
        assert task["held"].startswith("waiting: the day's spend (") and "is $3.00 of $3.00 ([budget] daily_cost)" \
            in task["held"]
        listed = cuctl(daemon.socket, "list").stdout
        assert "queued (held)" in listed and f"task {held} waiting: the day's spend" in listed
        assert "held:          waiting: the day's spend" in cuctl(daemon.socket, "show", str(held)).stdout
        assert metric(daemon, "cud_cost_total", model="gpt-5.4", currency="USD") == 3.0
        assert metric(daemon, "cud_budget_events_total", kind="reached", budget="daily_cost") == 1
        assert metric(daemon, "cud_budget_events_total", kind="reached", budget="max_output_tokens") == 1
        assert metric(daemon, "cud_budget_events_total", kind="warning", budget="max_cost") == 3
        daemon.call("cancel", id=held)
        assert len(daemon.model.requests) == 3  # one answer each; the held task never asked
    finally:
        receiver.stop()


def _wait_held(daemon: Daemon, task_id: int) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def held() -> bool:
        found.update(daemon.task(task_id))
        return bool(found.get("held"))

    wait_until(held, 30, f"task {task_id} to be held")
    return found


def metric(daemon: Daemon, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(daemon.call("metrics")):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def test_eval_max_cost_caps_the_whole_suite_and_the_table_shows_the_cost(start_daemon, tmp_path: Path) -> None:
    daemon = start_daemon(FOUR_ANSWERS, config=f'[budget]\non_budget = "fail"\n{PRICES}')
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("a", "b", "c"):
        (suite / f"{name}.toml").write_text(f'prompt = "Task {name}."\nreset = false\n[[checks]]\nanswer = "done"\n')
    out = tmp_path / "out"
    ran = cuctl(daemon.socket, "eval", str(suite), "--max-cost", "5", "--out", str(out))
    assert ran.returncode == 1, ran.stderr  # b ran out of money and c never ran: not every spec passed
    results = json.loads((out / "results.json").read_text())
    runs = {Path(run["spec"]).name: run for run in results["runs"]}
    # One seat: a gets the whole $5.00 and spends $4.00; b gets the $1.00 left and is ended at it; c gets nothing.
    assert (runs["a.toml"]["grant"], runs["a.toml"]["state"], runs["a.toml"]["cost"]["amount"]) == ("5", "succeeded", "4")
    assert (runs["b.toml"]["grant"], runs["b.toml"]["state"], runs["b.toml"]["cost"]["amount"]) == ("1", "budget_exceeded",
                                                                                                     "1")
    assert runs["c.toml"]["state"] == "refused" and runs["c.toml"]["task_id"] is None
    assert runs["c.toml"]["error"]["message"] == "not submitted: the suite's --max-cost 5 is spent or held (5)"
    assert "c.toml #1: failed: refused: not submitted: the suite's --max-cost 5 is spent or held (5)" in ran.stderr
    assert results["summary"]["total"]["cost"] == {"amount": "5", "currency": "USD", "unknown": None}
    assert len(daemon.model.requests) == 4 + 1
    table = ran.stdout.splitlines()
    assert table[0].split()[-1] == "COST" and table[-2].split()[0] == "total" and table[-2].split()[-1] == "$5.00"


def test_a_spec_naming_no_such_seat_is_refused_for_the_seat_before_any_price(start_daemon, tmp_path: Path) -> None:
    # The daemon's config max_cost needs a price for its default model, which has none; the spec's only
    # mistake is its seat: that is what the refusal names, not a price for a model it never named.
    daemon = start_daemon(FOUR_ANSWERS, config="max_cost = 2\n")
    spec = tmp_path / "nosuch.toml"
    spec.write_text('prompt = "look"\nseat = "nosuch"\n')
    refused = cuctl(daemon.socket, "submit", "--spec", str(spec))
    assert refused.returncode != 0 and "no seat named 'nosuch'" in refused.stderr, refused
    assert "price" not in refused.stderr, refused
    # with a seat that is there, the price is what is refused
    spec.write_text('prompt = "look"\n')
    assert "the daemon's config key 'max_cost' needs a price for model 'gpt-5.4'" in \
        cuctl(daemon.socket, "submit", "--spec", str(spec)).stderr
