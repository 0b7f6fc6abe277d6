"""The one rule of outcomes (cud/outcome.py): every error kind and final state is placed once, the rule's
invariants hold for any mix of state, verdict, error and checks, and docs/specs.md's table says the same."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cud.errors
from cud.outcome import (
    ERROR_KINDS,
    ERROR_STATES,
    EXIT_STATUS,
    FAILED_KINDS,
    FAILED_STATES,
    OUTCOMES,
    check_outcome,
    exit_status,
    outcome_of_check,
    task_outcome,
    verdict_outcome,
)
from cud.protocol import FINAL_STATES

ROOT = Path(__file__).resolve().parent.parent
ALL_KINDS = sorted({cls.kind for cls in vars(cud.errors).values()
                    if isinstance(cls, type) and issubclass(cls, cud.errors.CudError)})


def test_every_error_kind_is_placed_once_and_every_final_state_is_decided() -> None:
    placed = set(ERROR_KINDS) | set(FAILED_KINDS) | {"setup_failed"}
    assert not set(ERROR_KINDS) & set(FAILED_KINDS)
    assert placed == set(ALL_KINDS), (set(ALL_KINDS) - placed, placed - set(ALL_KINDS))
    assert set(ERROR_STATES) | set(FAILED_STATES) | {"succeeded", "failed"} == FINAL_STATES


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_a_failed_task_of_each_kind(kind: str) -> None:
    error = {"kind": kind, "message": "m", "details": {}}
    want = "error" if kind in ERROR_KINDS else "failed"
    assert task_outcome("failed", None, error) == want
    assert task_outcome("refused", None, error) == want  # cuctl eval's refusal: by the same kind
    assert task_outcome("failed", "passed", error) == want  # a task that did not succeed: its end decides


@pytest.mark.parametrize(("state", "verdict", "error", "want"), [
    ("succeeded", None, None, "passed"),
    ("succeeded", "passed", None, "passed"),
    ("succeeded", "failed", None, "failed"),
    ("succeeded", "error", None, "error"),
    ("failed", None, None, "failed"),  # the model gave up, or ran out of max_steps
    ("failed", None, {"kind": "setup_failed", "details": {"fault": "task"}}, "failed"),
    ("failed", None, {"kind": "setup_failed", "details": {"fault": "cud"}}, "error"),
    ("failed", None, {"kind": "setup_failed", "details": {}}, "failed"),  # recorded before fault: as then
    ("interrupted", None, None, "error"),
    ("cancelled", "passed", None, "error"),
    ("stuck", "failed", {"kind": "stuck"}, "failed"),
    ("budget_exceeded", None, {"kind": "budget_exceeded"}, "failed"),
])
def test_task_outcomes(state: str, verdict: str | None, error: dict[str, Any] | None, want: str) -> None:
    assert task_outcome(state, verdict, error) == want


checks = st.lists(st.sampled_from(OUTCOMES), max_size=8)


@given(checks)
def test_a_verdict_is_failed_if_any_check_failed_else_error_if_any_errored(outcomes: list[str]) -> None:
    verdict = verdict_outcome(outcomes)  # type: ignore[arg-type]  # sampled from OUTCOMES
    if not outcomes:
        assert verdict is None
    elif "failed" in outcomes:
        assert verdict == "failed"  # what could not be seen never hides what was seen to fail
    elif "error" in outcomes:
        assert verdict == "error"  # never passed on what was not seen, never failed for it
    else:
        assert verdict == "passed"


@given(st.sampled_from(sorted(FINAL_STATES) + ["refused"]), checks,
       st.one_of(st.none(), st.builds(lambda k, f: {"kind": k, "details": {"fault": f}},
                                      st.sampled_from(ALL_KINDS), st.sampled_from(["task", "cud", None]))))
def test_the_task_rule_invariants(state: str, outcomes: list[str], error: dict[str, Any] | None) -> None:
    verdict = verdict_outcome(outcomes)  # type: ignore[arg-type]  # sampled from OUTCOMES
    outcome = task_outcome(state, verdict, error)
    assert outcome in OUTCOMES
    assert (outcome == "passed") == (state == "succeeded" and verdict in (None, "passed"))
    if state == "succeeded" and verdict is not None:
        assert outcome == verdict
    if state in ERROR_STATES:
        assert outcome == "error"  # nobody judged it
    if state not in ("succeeded", *ERROR_STATES) and error is not None and error["kind"] in FAILED_KINDS:
        assert outcome == "failed"
    if state == "failed" and error is not None and error["kind"] in ERROR_KINDS:
        assert outcome == "error"


@given(st.lists(st.sampled_from(OUTCOMES)))
def test_the_exit_status(outcomes: list[str]) -> None:
    status = exit_status(outcomes)  # type: ignore[arg-type]  # sampled from OUTCOMES
    assert status == (1 if "failed" in outcomes else 3 if "error" in outcomes else 0)
    assert sorted(set(EXIT_STATUS.values())) == [0, 1, 3]  # 2 is a usage error, 130 Ctrl-C


def test_a_check_that_could_not_look_is_an_error_and_an_old_record_reads_by_passed() -> None:
    assert [check_outcome(False, False), check_outcome(True, False), check_outcome(True, True)] == \
        ["error", "failed", "passed"]
    assert outcome_of_check({"passed": False, "outcome": "error"}) == "error"
    assert outcome_of_check({"passed": True}) == "passed" and outcome_of_check({"passed": False}) == "failed"


def test_the_docs_table_places_every_kind_as_the_code_does() -> None:
    text = (ROOT / "docs" / "specs.md").read_text()
    section = text.split("## Outcomes", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([a-z_]+)`[^|]*\|[^|]*\| \*\*(passed|failed|error)", section, re.M))
    for kind in ERROR_KINDS:
        assert rows.get(kind) == "error", kind
    for kind in FAILED_KINDS:
        assert rows.get(kind) == "failed", kind
    for state in ERROR_STATES:
        assert rows.get(state) == "error", state
