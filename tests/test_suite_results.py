"""cuctl eval's results model: the Wilson interval, when an attempt counts as judged, and results.json round trips."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cud.errors import ConfigError
from cud.suite.results import Attempt, Results, wilson


@given(st.integers(min_value=1, max_value=10_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
@example((0, 1))
@example((3, 3))
@example((0, 149))  # found: the lower end came out 1.7e-18, not 0
def test_the_wilson_interval_holds_the_rate_inside_zero_and_one_and_is_never_zero_width(case: tuple[int, int]) -> None:
    passed, runs = case
    low, high = wilson(passed, runs)
    assert 0.0 <= low <= passed / runs <= high <= 1.0 and high - low > 0
    # The score interval's ends solve |p - q| = z * sqrt(q (1 - q) / n) for q (where they are not clipped).
    z, p = 1.959963984540054, passed / runs
    for q in (low, high):
        if 1e-9 < q < 1 - 1e-9:
            assert math.isclose(abs(p - q), z * math.sqrt(q * (1 - q) / runs), rel_tol=1e-6, abs_tol=1e-12)


def test_known_wilson_intervals() -> None:
    assert [round(x, 4) for x in wilson(3, 3)] == [0.4385, 1.0]
    assert [round(x, 4) for x in wilson(5, 10)] == [0.2366, 0.7634]
    assert wilson(0, 0) == (0.0, 1.0)


SETUP_BY_CUD = {"kind": "setup_failed", "message": "m", "details": {"fault": "cud"}}
SETUP_BY_TASK = {"kind": "setup_failed", "message": "m", "details": {"fault": "task"}}
LOST_SEAT = {"kind": "display_unavailable", "message": "m", "details": {}}


@pytest.mark.parametrize(("state", "verdict", "error", "attempt", "retry_errors", "judged", "outcome"), [
    ("succeeded", "passed", None, 1, 1, True, "passed"),
    ("succeeded", "failed", None, 1, 1, True, "failed"),  # failed: never retried
    ("succeeded", None, None, 1, 1, True, "passed"),  # no checks: the task's state judges it
    ("succeeded", "error", None, 1, 1, False, "error"),  # a check could not look: run once more
    ("succeeded", "error", None, 2, 1, True, "error"),  # ... and the retry is judged, whatever it is
    ("succeeded", "error", None, 1, 0, True, "error"),  # --retry-errors 0: never retried
    ("succeeded", "error", None, 2, 2, False, "error"),  # --retry-errors 2: after the first retry, a second
    ("failed", None, None, 1, 1, True, "failed"),  # the model gave up
    ("failed", None, SETUP_BY_TASK, 1, 1, True, "failed"),  # a setup command exited non-zero
    ("failed", None, SETUP_BY_CUD, 1, 1, False, "error"),  # a setup cud could not do
    ("failed", None, LOST_SEAT, 1, 1, False, "error"),
    ("failed", "failed", None, 1, 1, True, "failed"),
    ("cancelled", None, None, 1, 1, False, "error"),  # nobody judged it
    ("refused", None, {"kind": "not_found", "message": "m", "details": {}}, 1, 1, True, "failed"),
    ("refused", None, {"kind": "access_denied", "message": "m", "details": {}}, 1, 1, True, "error"),  # not again
    ("interrupted", None, None, 1, 1, False, "error"),  # run once more
    ("interrupted", None, None, 2, 1, True, "error"),  # interrupted twice: judged, error
    ("running", None, None, 1, 1, False, "running"),
    ("queued", None, None, 1, 1, False, "running"),
])
def test_when_an_attempt_is_judged(state: str, verdict: str | None, error: dict[str, Any] | None, attempt: int,
                                   retry_errors: int, judged: bool, outcome: str) -> None:
    a = Attempt("x.toml", 0, attempt, task_id=1, state=state, verdict=verdict, error=error,
                retry_errors=retry_errors)
    assert (a.judged, a.outcome) == (judged, outcome)
    if a.ended and not judged:
        assert a.next().attempt == attempt + 1 and a.next().retry_errors == retry_errors


def test_results_json_round_trips_and_a_bad_one_is_named(tmp_path: Path) -> None:
    results = Results({"specs": ["a.toml", "b.toml"], "repeat": 2, "files": {}},
                      [Attempt("a.toml", 0, 1, task_id=4, state="interrupted"),
                       Attempt("a.toml", 0, 2, task_id=7, state="succeeded", verdict="passed", score=1.0),
                       Attempt("b.toml", 1, 1, task_id=5, state="succeeded", verdict="failed", score=0.5)])
    results.save(tmp_path)
    again = Results.load(tmp_path)
    assert [a.to_dict() for a in again.attempts] == [a.to_dict() for a in results.attempts]
    runs = again.spec_runs()
    assert [(r.spec, r.repeat, r.last.outcome) for r in runs] == [
        ("a.toml", 0, "passed"), ("a.toml", 1, "pending"), ("b.toml", 0, "pending"), ("b.toml", 1, "failed")]
    total = again.summary()["total"]
    assert (total["runs"], total["judged"], total["passed"], total["interrupted_attempts"]) == (4, 2, 1, 1)
    assert (total["failed"], total["error"], total["retried_attempts"]) == (1, 0, 1)
    assert again.summary()["spec_runs"][0] == {"spec": "a.toml", "repeat": 0, "outcome": "passed", "attempts": [
        {"attempt": 1, "task_id": 4, "outcome": "error"}, {"attempt": 2, "task_id": 7, "outcome": "passed"}]}
    assert again.retry_errors == 1  # a file from before --retry-errors: one retry, as interrupted ones had
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(ConfigError, match="is not a cuctl eval results file"):
        Results.load(tmp_path)


def test_a_suites_cost_sums_every_attempt_exactly_and_an_unknown_one_makes_it_unknown() -> None:
    from cud.suite.results import total_cost

    def ran(spec: str, amount: str | None, attempt: int = 1) -> Attempt:
        cost = {"amount": amount, "currency": "USD", "unknown": None if amount else "no price for model 'x'"}
        return Attempt(spec, 0, attempt, task_id=attempt, state="succeeded", cost=cost)

    tenths = [ran("a.toml", "0.1", n) for n in range(1, 11)]  # ten tenths: 1 exactly, as floats never sum
    assert total_cost(tenths) == {"amount": "1", "currency": "USD", "unknown": None}
    assert total_cost([*tenths, ran("b.toml", None)])["unknown"] == "no price for model 'x'"
    assert total_cost([Attempt("a.toml", 0, 1)]) is None  # nothing answered yet
    # three unpriced models: the total names them all, each once, sorted
    several = [Attempt(f"{m}.toml", 0, 1, task_id=n, state="succeeded",
                       cost={"amount": None, "currency": "USD", "unknown": f"no price for model {m!r}"})
               for n, m in enumerate(["gpt-b", "gpt-a", "gpt-c", "gpt-a"])]
    assert total_cost([*tenths, *several])["unknown"] == "no price for models 'gpt-a', 'gpt-b', 'gpt-c'"
    results = Results({"specs": ["a.toml"], "repeat": 1}, tenths)
    assert results.summary()["specs"][0]["cost"]["amount"] == "1" and results.summary()["total"]["cost"]["amount"] == "1"


def test_a_suites_cap_is_shared_out_and_never_overcommitted() -> None:
    from decimal import Decimal

    from cud.suite.budget import SuiteBudget

    budget = SuiteBudget("10")
    # Nothing spent: 10 shared by the 3 tasks about to start (cut down, never above the share).
    assert budget.grant([], 3, None) == Decimal("3.333333")
    assert budget.grant([], 1, "2.5") == Decimal("2.5")  # the spec's own max_cost is the most
    flying = Attempt("a.toml", 0, 1, task_id=1, state="running", grant="6",
                     cost={"amount": "1", "currency": "USD", "unknown": None})
    ended = Attempt("b.toml", 0, 1, task_id=2, state="succeeded", grant="3",
                    cost={"amount": "0.5", "currency": "USD", "unknown": None})
    # In flight a task holds its grant (6), ended one what it spent (0.5): 3.5 left.
    assert budget.committed([flying, ended]) == Decimal("6.5") and budget.grant([flying, ended], 1, None) == Decimal("3.5")
    approved_past = Attempt("a.toml", 0, 1, task_id=1, state="running", grant="6",
                            cost={"amount": "9.75", "currency": "USD", "unknown": None})  # a person said yes at 6
    assert budget.grant([approved_past, ended], 1, None) is None
    with pytest.raises(ConfigError, match="--max-cost must be an amount of money"):
        SuiteBudget("lots")


def test_the_index_has_error_and_cost_columns_and_numbers_for_people(tmp_path: Path) -> None:
    """The papercut: the index showed ``0.833333`` and ``7002.0`` and had no cost column."""
    from cud.suite.index import write_index

    cost = {"amount": "0.0123", "currency": "USD", "unknown": None}
    usage = {"input_tokens": 7000, "output_tokens": 2}
    results = Results({"specs": ["a.toml", "b.toml"], "repeat": 1, "started_at": "2026-12-05T10:00:00+00:00"}, [
        Attempt("a.toml", 0, 1, task_id=1, state="succeeded", verdict="failed", score=0.833333, usage=usage,
                cost=cost, steps=3, run_seconds=4.25),
        Attempt("b.toml", 0, 1, task_id=2, state="interrupted", cost=cost),
        Attempt("b.toml", 0, 2, task_id=3, state="succeeded", verdict="error", score=0.5, cost=cost)])
    write_index(results, tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert "0.833333" not in page and "7002.0" not in page and "7,002" in page and ">0.83<" in page
    assert "<th>error</th>" in page and "<th>cost</th>" in page
    assert "$0.037" in page and "$0.012" in page  # the total (three attempts) and one attempt's, as money
    assert '<td class="error">error, retried</td>' in page and '<td class="error">error</td>' in page
