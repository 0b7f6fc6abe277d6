"""A suite's results: one record per attempt of a spec-run, when one counts as judged, and the summary.

A **spec-run** is one repeat of one spec (``spec``, ``repeat``). Each submission of it is an
**attempt**, kept in ``results.json`` in the order it was made, so nothing is silent: an attempt
that ended ``error`` and was run again stays in the file beside its retry. Each attempt's
**outcome** is the one rule's (:func:`cud.outcome.task_outcome`): ``passed``, ``failed`` (the
task's own), or ``error`` (cud or the infrastructure could not do its part: a check that could not
look, the daemon interrupted mid-task, a lost seat or bus, the model's API down). A spec-run is
judged by its last attempt:

- an attempt that ended ``passed`` or ``failed`` is judged: a ``failed`` run is never retried;
- an attempt that ended ``error`` is submitted again, up to ``--retry-errors`` more times
  (default 1, :data:`RETRY_ERRORS`); the last one is judged ``error`` whatever happens;
- a refused attempt (the daemon refused the submission, or the suite did not submit it) is
  judged at once: the same spec would be refused again. An OSWorld task that did not convert
  (``--skip-unconvertible``) is one, of kind ``not_converted``: its outcome is ``error`` (cud has no
  counterpart for part of it; the app was never tried), and the summary counts it apart, as
  ``not_converted``, beside ``passed``, ``failed`` and ``error`` (runs that ran and errored).

An OSWorld suite (``suite.domains``: each task's domain) is summed per domain too
(:meth:`Results.summary`'s ``domains``): tasks, converted, and the counts of its runs.

A suite of several models (``cuctl eval --model a,b``: ``suite.models``) runs every spec-run on
each: a spec-run is then (``spec``, ``model``, ``repeat``), each attempt records its ``model``, and
the summary is the same summary per model (``models``), beside the total over all of them. A suite
of one model (or none: each spec's own) records no model per attempt, as before models could be several.

Every attempt is submitted under an idempotency key (:meth:`Results.key_of`): a submission whose
reply was lost, made again, re-attaches to the task the daemon already has instead of queueing a
second one that the suite would not count.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from cud.budget import NO_PRICE, format_amount
from cud.errors import ConfigError, NotConverted
from cud.outcome import OUTCOMES, Outcome, outcome_of_check, task_outcome
from cud.protocol import FINAL_STATES
from cud.suite.plan import Planned, Unconverted

__all__ = ("Attempt", "Results", "SpecRun", "wilson", "RETRY_ERRORS", "RESULTS_FILE")

RESULTS_FILE = "results.json"
#: ``--retry-errors``' default: a spec-run whose attempt ended ``error`` is submitted once more.
RETRY_ERRORS = 1
#: z for a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(passed: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate: unlike p ± z·sqrt(p(1-p)/n) it stays inside [0, 1] and is not
    zero-width at 0 or n passes, which is what small suites have."""
    if runs == 0:
        return 0.0, 1.0
    p = passed / runs
    centre = (p + z * z / (2 * runs)) / (1 + z * z / runs)
    half = z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs)) / (1 + z * z / runs)
    # At 0 or n passes an end is exactly 0 or 1; computed, it would be off by a rounding error.
    low = 0.0 if passed == 0 else max(0.0, centre - half)
    high = 1.0 if passed == runs else min(1.0, centre + half)
    return low, high


@dataclass(eq=False)  # each attempt is itself: the loop's lists find and remove it by identity
class Attempt:
    """One submission of a spec-run and what its task became (the fields of results.json's ``runs``)."""

    spec: str  # the spec file as the suite names it (relative to the folder given, or as given)
    repeat: int  # 0-based
    attempt: int  # 1, then 2, 3, ... for the retries of one that ended error
    task_id: int | None = None
    seat: str | None = None
    state: str = "pending"  # pending (not submitted yet), refused, or the task's state
    verdict: str | None = None
    score: float | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)  # {name, kind, weight, passed, outcome, why}
    steps: int = 0
    usage: dict[str, Any] | None = None
    cost: dict[str, Any] | None = None  # what its task cost (cud.protocol.CostView)
    grant: str | None = None  # the max_cost it was submitted with under --max-cost (cud.suite.budget)
    error: dict[str, Any] | None = None
    reason: str | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    queued_seconds: float | None = None
    run_seconds: float | None = None
    report: str | None = None  # the report's path in the output folder
    video: str | None = None
    model: str | None = None  # the model it ran on, in a suite of several models (else the suite's, or the spec's)
    #: The suite's ``--retry-errors``: how many more attempts a spec-run whose attempt ended error gets (not a
    #: field of results.json's runs: its ``suite`` has it).
    retry_errors: int = field(default=RETRY_ERRORS, compare=False, repr=False)

    @property
    def ended(self) -> bool:
        return self.state in FINAL_STATES or self.state == "refused"

    @property
    def ended_as(self) -> Outcome | None:
        """Its outcome once it ended (cud.outcome.task_outcome), None before."""
        return task_outcome(self.state, self.verdict, self.error) if self.ended else None

    @property
    def judged(self) -> bool:
        """Ended, and not to be retried (see the module's text): an error is retried while ``retry_errors`` lasts."""
        return self.ended and (self.ended_as != "error" or self.state == "refused"
                               or self.attempt > self.retry_errors)

    @property
    def passed(self) -> bool:
        return self.ended_as == "passed"

    @property
    def outcome(self) -> str:
        """passed, failed or error once ended (an error that is retried too); running or pending before."""
        if self.ended_as is None:
            return "pending" if self.task_id is None else "running"
        return self.ended_as

    def next(self) -> Attempt:
        """The spec-run's next attempt, after this one ended error."""
        return Attempt(self.spec, self.repeat, self.attempt + 1, model=self.model, retry_errors=self.retry_errors)

    def update(self, task: dict[str, Any]) -> None:
        """Take what ``show`` says of the task."""
        verdict = task.get("verdict") or {}
        self.state, self.seat, self.steps = task["state"], task.get("seat"), task.get("steps") or 0
        self.verdict, self.score = verdict.get("verdict"), verdict.get("score")
        self.checks = [{**{k: c.get(k) for k in ("name", "kind", "weight", "passed", "why")},
                        "outcome": outcome_of_check(c)} for c in verdict.get("checks", [])]
        self.usage, self.error, self.reason = task.get("usage"), task.get("error"), task.get("reason")
        self.cost = task.get("cost")
        self.created_at, self.started_at, self.finished_at = (task.get("created_at"), task.get("started_at"),
                                                               task.get("finished_at"))
        self.queued_seconds = _between(self.created_at, self.started_at)
        self.run_seconds = _between(self.started_at, self.finished_at)

    def failures(self) -> list[str]:
        """Why it failed or errored, one line each: every check's why that did not pass, or the task's end."""
        lines = [f"{c['name']}: {c['why']}" for c in self.checks if outcome_of_check(c) != "passed"]
        if self.state != "succeeded" or not lines:
            because = (self.error or {}).get("message") or self.reason or ""
            lines.insert(0, f"task {self.state}" + (f": {because}" if because else ""))
        return lines

    @property
    def not_converted(self) -> bool:
        """An OSWorld task that did not convert (``--skip-unconvertible``): listed, never run."""
        return self.state == "refused" and (self.error or {}).get("kind") == NotConverted.kind

    def to_dict(self) -> dict[str, Any]:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "retry_errors"}
        if self.model is None:
            del data["model"]  # a suite of one model: its runs as they were before models could be several
        return {**data, "judged": self.judged, "outcome": self.outcome}

    @classmethod
    def from_dict(cls, data: dict[str, Any], retry_errors: int = RETRY_ERRORS) -> Attempt:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data and k != "retry_errors"},
                   retry_errors=retry_errors)


def _between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        return round((datetime.fromisoformat(end.replace("Z", "+00:00"))
                      - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds(), 3)
    except ValueError:
        return None


@dataclass
class SpecRun:
    spec: str
    repeat: int
    attempts: list[Attempt]
    model: str | None = None  # in a suite of several models; else None

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]


@dataclass
class Results:
    """Everything results.json holds: how the suite was asked for, and every attempt."""

    suite: dict[str, Any]  # run, paths, specs, repeat, tags, seats, started_at
    attempts: list[Attempt] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The suite's own name in its tasks' keys; results.json keeps it, so --resume uses the same
        # (a file from before keys gets one now: only its later submissions are protected).
        self.suite.setdefault("run", secrets.token_hex(6))
        self.suite.setdefault("retry_errors", RETRY_ERRORS)  # a file from before --retry-errors: its one retry
        for attempt in self.attempts:
            attempt.retry_errors = self.retry_errors

    @property
    def retry_errors(self) -> int:
        return int(self.suite["retry_errors"])

    def osworld(self, planned: Sequence[Planned | Unconverted], skip_unconvertible: bool) -> None:
        """A new OSWorld suite: each task's domain (``domains``), which did not convert (``not_converted``), and
        each run of those refused (kind ``not_converted``) from the start, so results.json lists them."""
        self.suite["domains"] = {p.name: p.domain for p in planned}
        self.suite["skip_unconvertible"] = skip_unconvertible
        self.suite["not_converted"] = [p.name for p in planned if isinstance(p, Unconverted)]
        for p in planned:
            if isinstance(p, Unconverted):
                self.attempts.extend(Attempt(p.name, r, 1, state="refused", error=p.error.to_dict(), model=model,
                                             retry_errors=self.retry_errors)
                                     for model in self.models for r in range(self.suite["repeat"]))

    def key_prefix(self) -> str:
        """What every key of this suite's tasks starts with (``cuctl list --key-prefix``)."""
        return f"eval:{self.suite['run']}/"

    @property
    def models(self) -> list[str | None]:
        """The models each spec-run is run on: a suite of several models' names, else ``[None]`` (one run each,
        on ``suite.model``, ``--model``'s one name, or the spec's own)."""
        several: list[str] | None = self.suite.get("models")
        return list(several) if several else [None]

    def model_of(self, attempt: Attempt) -> str | None:
        """The model ``attempt`` is submitted with (None: the spec's own)."""
        return attempt.model or self.suite.get("model")

    def spec_run_key(self, spec: str, repeat: int, model: str | None = None) -> str:
        """``eval:RUN/SPEC-INDEX/REPEAT`` (several models: ``eval:RUN/SPEC-INDEX/mMODEL-INDEX/REPEAT``): a
        spec-run's keys without the attempt (a fleet's registry numbers those).

        Indexes, not names: a file's or a model's name may hold characters a key may not.
        """
        on = "" if model is None else f"m{self.models.index(model)}/"
        return f"{self.key_prefix()}{self.suite['specs'].index(spec)}/{on}{repeat}"

    def key_of(self, attempt: Attempt) -> str:
        """The idempotency key of ``attempt``'s submission: its spec-run's key (:meth:`spec_run_key`) and ``/aATTEMPT``."""
        return f"{self.spec_run_key(attempt.spec, attempt.repeat, attempt.model)}/a{attempt.attempt}"

    def spec_runs(self) -> list[SpecRun]:
        """Every spec-run of the suite, in the suite's order (each spec on each model, then its repeats), each with
        its attempts (none yet: one pending)."""
        runs = []
        for spec in self.suite["specs"]:
            for model in self.models:
                for repeat in range(self.suite["repeat"]):
                    mine = [a for a in self.attempts if a.spec == spec and a.repeat == repeat and a.model == model]
                    runs.append(SpecRun(spec, repeat, mine or [Attempt(spec, repeat, 1, model=model,
                                                                       retry_errors=self.retry_errors)], model))
        return runs

    def summary(self) -> dict[str, Any]:
        """Per spec: runs, passed, failed, error, the pass rate and its 95% Wilson interval, means of steps, tokens,
        seconds; every spec-run's outcome and attempts. A suite of several models: that, per model (``models``:
        each with its ``model``, ``specs``, ``total`` and an OSWorld suite's ``domains``), and the ``total`` over
        them all (the suite's cost, what ``--max-cost`` caps)."""
        runs = self.spec_runs()
        several = self.models != [None]
        summary = {} if several else self._summary_of(runs, self.attempts)
        if several:
            summary["models"] = [{"model": model, **self._summary_of([r for r in runs if r.model == model],
                                                                      [a for a in self.attempts if a.model == model])}
                                 for model in self.models]
            summary["total"] = self._total(runs, self.attempts)
        spec_runs = [{"spec": r.spec, **({"model": r.model} if several else {}), "repeat": r.repeat,
                      "outcome": r.last.outcome if r.last.judged else None,
                      "attempts": [{"attempt": a.attempt, "task_id": a.task_id, "outcome": a.outcome}
                                   for a in r.attempts]} for r in runs]
        summary["spec_runs"] = spec_runs
        return summary

    def _summary_of(self, runs: list[SpecRun], attempts: list[Attempt]) -> dict[str, Any]:
        """The summary of these spec-runs (the suite's, or one model's): a row per spec (an OSWorld suite's per
        domain too) and their total; ``attempts``: theirs, every one (for what they cost)."""
        per_spec: list[dict[str, Any]] = []
        for spec in self.suite["specs"]:
            per_spec.append(_row(spec, [r.last for r in runs if r.spec == spec]))
            per_spec[-1]["cost"] = total_cost([a for a in attempts if a.spec == spec])
        summary: dict[str, Any] = {"specs": per_spec, "total": self._total(runs, attempts)}
        domains: dict[str, str] | None = self.suite.get("domains")
        if domains is not None:
            summary["domains"] = [self._domain_row(domain, [s for s in self.suite["specs"] if domains[s] == domain],
                                                   runs, attempts) for domain in dict.fromkeys(domains.values())]
        return summary

    def _total(self, runs: list[SpecRun], attempts: list[Attempt]) -> dict[str, Any]:
        """The total row of these spec-runs: a spec's row over them all, its retries and interruptions."""
        total = _row("total", [r.last for r in runs])
        total["cost"] = total_cost(attempts)
        total["interrupted_attempts"] = sum(1 for a in attempts if a.state == "interrupted")
        total["retried_attempts"] = sum(len(r.attempts) - 1 for r in runs)
        if self.suite.get("domains") is not None:
            total.update(self._tasks(self.suite["specs"]))
        return total

    def _tasks(self, specs: list[str]) -> dict[str, int]:
        """How many tasks, and how many of them converted (an OSWorld suite's)."""
        unconverted = set(self.suite.get("not_converted", ()))
        return {"tasks": len(specs), "converted": sum(1 for s in specs if s not in unconverted)}

    def _domain_row(self, domain: str, specs: list[str], runs: list[SpecRun],
                    attempts: list[Attempt]) -> dict[str, Any]:
        """An OSWorld domain's row: its tasks and how many converted, then a spec's row over its runs."""
        mine = set(specs)
        row = _row(domain, [r.last for r in runs if r.spec in mine])
        del row["spec"]
        return {"domain": domain, **self._tasks(specs), **row,
                "cost": total_cost([a for a in attempts if a.spec in mine])}

    def save(self, folder: Path) -> None:
        """results.json, written beside and renamed in (a reader never sees half a file)."""
        data = {"version": 1, "suite": self.suite, "runs": [a.to_dict() for a in self.attempts],
                "summary": self.summary()}
        tmp = folder / f".{RESULTS_FILE}.part"
        tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, folder / RESULTS_FILE)

    @classmethod
    def load(cls, folder: Path) -> Results:
        path = folder / RESULTS_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(data["suite"], [Attempt.from_dict(a) for a in data["runs"]])  # retry_errors: the suite's
        except OSError as exc:
            raise ConfigError(f"--resume {str(folder)!r}: cannot read {str(path)!r}: {exc.strerror}",
                              path=str(path)) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"--resume {str(folder)!r}: {str(path)!r} is not a cuctl eval results file ({exc})",
                              path=str(path)) from None


def total_cost(attempts: list[Attempt]) -> dict[str, Any] | None:
    """What these attempts' tasks cost together, every attempt counted (a retried one cost money too), as a
    CostView: exact (Decimal), unknown if any task's is, None if none has answered yet."""
    costs = [a.cost for a in attempts if a.cost]
    if not costs:
        return None
    unknown = [c for c in costs if c.get("amount") is None]
    if unknown:
        return {"amount": None, "currency": unknown[0].get("currency"),
                "unknown": unknown_reasons([str(c.get("unknown") or "no price") for c in unknown])}
    amount = sum((Decimal(str(c["amount"])) for c in costs), Decimal(0))
    return {"amount": format_amount(amount), "currency": costs[0].get("currency"), "unknown": None}


def unknown_reasons(reasons: list[str]) -> str:
    """Why several costs are unknown, each reason once and sorted; the daemon's ``no price for model 'x'``
    (cud.daemon.budget.cost) said once for all the models: ``no price for models 'a', 'b', 'c'``."""
    models = sorted({r[len(NO_PRICE):] for r in reasons if r.startswith(NO_PRICE)})
    others = sorted({r for r in reasons if not r.startswith(NO_PRICE)})
    priced = [] if not models else [NO_PRICE.rstrip() + ("s " if len(models) > 1 else " ") + ", ".join(models)]
    return "; ".join(priced + others)


def _row(name: str, last: list[Attempt]) -> dict[str, Any]:
    """One spec's (or the total's) row. The pass rate is over the runs that were told, passed or failed: an error
    says nothing of the app, so it is counted apart (``error``), never as a failure; nor does a task that did not
    convert (``not_converted``). ``runs`` = passed + failed + error + not_converted + the runs not judged yet."""
    judged = [a for a in last if a.judged]
    counts = dict.fromkeys(OUTCOMES, 0)
    for a in judged:
        if not a.not_converted:  # an error, counted apart: it never ran
            counts[a.outcome] += 1  # type: ignore[index]  # judged: ended, so one of OUTCOMES
    passed, told = counts["passed"], counts["passed"] + counts["failed"]
    low, high = wilson(passed, told)

    def mean(values: list[float]) -> float | None:
        return round(sum(values) / len(values), 3) if values else None

    tokens = [float((a.usage or {}).get("input_tokens", 0) + (a.usage or {}).get("output_tokens", 0))
              for a in judged if a.task_id is not None]
    return {"spec": name, "runs": len(last), "judged": len(judged), "passed": passed,
            "failed": counts["failed"], "error": counts["error"],
            "not_converted": sum(1 for a in judged if a.not_converted), "pass_rate": passed / told if told else None,
            "interval95": [round(low, 4), round(high, 4)],
            "mean_steps": mean([float(a.steps) for a in judged if a.task_id is not None]),
            "mean_tokens": mean(tokens),
            "mean_seconds": mean([a.run_seconds for a in judged if a.run_seconds is not None])}
