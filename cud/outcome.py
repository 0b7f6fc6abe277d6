"""A check's, a verdict's and a task's outcome: ``passed``, ``failed`` or ``error``. The one rule.

``passed`` and ``failed`` are the task's: the app did, or visibly did not, do what the spec
asked. ``error`` means cud or the infrastructure could not do its part (a check that could not
look, a setup that failed for cud's own reasons, a lost bus or seat, the model's API down, the
daemon stopped mid-task): nobody can tell whether the app works. Every place that says how a
task did asks here: the daemon's verdict and metrics, ``cuctl submit --wait`` and ``follow``'s
exit status, ``cuctl eval``'s table, results.json, JUnit and index, the report's badge.

- a **check**: ``error`` if it could not look (a CudError or OSError while looking, no
  session, a metric that could not judge), ``failed`` if it looked and disagreed, else ``passed``;
- a **verdict**, by the spec's ``pass_if``: with ``all`` (the default) ``failed`` if any check
  failed (the app visibly failed, whatever else could not be seen), else ``error`` if any check
  errored, else ``passed``; with ``any`` ``passed`` if any check passed, else ``failed`` if any
  failed, else ``error``;
- a **task**: succeeded with no verdict or a passed verdict is ``passed``, with a failed or
  error verdict that; a task that ended without succeeding is decided by its state and its
  error's kind (:data:`ERROR_KINDS`, :data:`FAILED_KINDS`; a failed setup by who failed,
  ``details.fault``). docs/specs.md ("Outcomes") has the table of every kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = ("ERROR_KINDS", "ERROR_STATES", "EXIT_STATUS", "FAILED_KINDS", "FAILED_STATES", "OUTCOMES", "PASS_IF",
           "Outcome", "PassIf", "check_outcome", "ended_outcome", "exit_status", "outcome_of_check", "task_outcome",
           "verdict_outcome")

Outcome = Literal["passed", "failed", "error"]
OUTCOMES: tuple[Outcome, ...] = ("passed", "failed", "error")
#: How a spec's checks combine into its verdict (its ``pass_if``): every one must pass, or one is enough.
PassIf = Literal["all", "any"]
PASS_IF: tuple[PassIf, ...] = ("all", "any")

#: Error kinds (cud.errors) of a task that ended without succeeding that say cud or the infrastructure
#: could not do its part: the outcome is ``error``. Each with why, in words (docs/specs.md's table).
ERROR_KINDS: dict[str, str] = {
    "display_unavailable": "the seat's display went away mid-task",
    "driver_timeout": "the seat's display stopped answering",
    "driver": "the driver could not carry out an action",
    "authentication_failed": "the display refused cud's credentials",
    "accessibility": "the accessibility bus could not be reached",
    "connection": "the daemon could not be reached",
    "session": "the seat's session could not run a command or finish a reset",
    "storage_full": "the daemon's disk is full",
    "internal": "a bug in cud or an unexpected library error",
    "api": "the model's API failed the request",
    "model_request": "the model's API refused cud's request (a setting fixes it)",
    "config": "cud's config cannot run the task (a price missing for the model)",
    "access_denied": "the submitter may not do this on this daemon",
    "protocol": "cud's client and daemon did not understand each other",
    "too_many_connections": "the daemon's connection slots were taken",
    "wrong_state": "the task was not in a state cud expected",
    "fleet": "Ray spent its retries (the fleet's nodes kept dying)",
    "not_converted": "an OSWorld task cud has no counterpart for (listed by cuctl eval, never run)",
    "bad_request": "the console's request was malformed",
    "console": "the console refused the request",
    "error": "cud could not do its part",
}
#: Error kinds of the task's own failure: the outcome is ``failed``.
FAILED_KINDS: dict[str, str] = {
    "computer_use": "the model's answer was not a valid action (the model failed)",
    "action_rejected": "the model asked for an action that is not valid",
    "out_of_bounds": "the model aimed outside the screen",
    "unknown_key": "the model pressed a key that does not exist",
    "approval": "a person denied the model's action, or did not answer in time",
    "policy_denied": "a policy rule denied the model's action",
    "timeout": "the task ran past its max_duration",
    "stuck": "the model repeated itself on an unchanged screen",
    "budget_exceeded": "the task (or the suite) reached its budget",
    "not_found": "what the task names (a seat, a file) is not there",
    "path_refused": "a path of the task leads out of the seat's home",
    "spec": "the spec is invalid",
}
#: States of an ended task decided by the state alone (the error's kind aside).
ERROR_STATES: dict[str, str] = {
    "interrupted": "the daemon stopped (or was told to stop) mid-task: nobody judged it",
    "cancelled": "a person cancelled it: nobody judged it",
}
FAILED_STATES: dict[str, str] = {
    "stuck": "the model repeated itself",
    "budget_exceeded": "the task reached its budget",
}
#: ``cuctl eval``, ``cuctl submit --wait`` and ``cuctl follow`` exit with this for each outcome
#: (2 is a usage error, 130 Ctrl-C): 1 when any run failed, else 3 when any errored.
EXIT_STATUS: dict[Outcome, int] = {"passed": 0, "failed": 1, "error": 3}


def check_outcome(looked: bool, agreed: bool) -> Outcome:
    """A check's outcome: ``error`` if it could not look, ``failed`` if it looked and disagreed."""
    if not looked:
        return "error"
    return "passed" if agreed else "failed"


def outcome_of_check(check: Mapping[str, Any]) -> Outcome:
    """The outcome of a judged check (a CheckResultView); one recorded before outcomes by its ``passed``."""
    for outcome in OUTCOMES:
        if check.get("outcome") == outcome:
            return outcome
    return "passed" if check.get("passed") else "failed"


def verdict_outcome(checks: Iterable[Outcome], pass_if: str = "all", *,
                    answer_fails: bool = False) -> Outcome | None:
    """A verdict from its checks' outcomes (None without checks), by the spec's ``pass_if``.

    ``all``: any failed is ``failed``, else any error is ``error``, else ``passed``. ``any``: any
    passed is ``passed``, else any failed is ``failed`` (what looked and disagreed outweighs what
    could not look, as with ``all``), else ``error``. ``answer_fails`` (the final message matched
    the spec's ``fail_if_answer``): ``failed`` whatever the checks say, as OSWorld scores 0 a feasible
    task its model declared failed.
    """
    if pass_if not in PASS_IF:
        raise ValueError(f"pass_if must be one of {', '.join(PASS_IF)}, got {pass_if!r}")
    seen = set(checks)
    if not seen:
        return None
    if answer_fails:
        return "failed"
    if pass_if == "any":
        return "passed" if "passed" in seen else "failed" if "failed" in seen else "error"
    if "failed" in seen:
        return "failed"
    return "error" if "error" in seen else "passed"


def task_outcome(state: str, verdict: str | None, error: Mapping[str, Any] | None) -> Outcome:
    """An ended task's outcome, from its state, its verdict (None: no checks, or not judged) and its error
    (a CudError's dict: its ``kind`` decides, and a ``setup_failed``'s ``details.fault``).

    ``state`` may also be ``refused`` (cuctl eval's: never submitted, or refused at submit): its error's
    kind decides, as for a failed task.
    """
    if error is None:
        return ended_outcome(state, verdict, None, None)
    return ended_outcome(state, verdict, str(error.get("kind")), (error.get("details") or {}).get("fault"))


def ended_outcome(state: str, verdict: str | None, kind: str | None, fault: str | None) -> Outcome:
    """:func:`task_outcome` from the error's ``kind`` and ``fault`` alone (the metrics count by them in SQL)."""
    if state == "succeeded":
        if verdict in (None, "passed"):
            return "passed"
        return "error" if verdict == "error" else "failed"
    if state in ERROR_STATES:
        return "error"
    if state in FAILED_STATES:
        return "failed"
    if kind is None:
        return "failed"  # the model gave up, or the loop ended without an answer
    if kind == "setup_failed":
        return "error" if fault == "cud" else "failed"
    return "error" if kind in ERROR_KINDS else "failed"


def exit_status(outcomes: Iterable[Outcome]) -> int:
    """The exit status for these outcomes: 1 if any failed, else 3 if any errored, else 0."""
    seen = set(outcomes)
    if "failed" in seen:
        return EXIT_STATUS["failed"]
    return EXIT_STATUS["error"] if "error" in seen else EXIT_STATUS["passed"]
