"""A suite's numbers for people, the same in ``cuctl eval``'s table and the HTML index: counts, the pass rate
with its interval, means to a sensible precision, money by :func:`cud.budget.describe_cost`, scores to two
decimals. results.json keeps the exact values; nothing here is read back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cud.budget import describe_cost
from cud.suite.results import Attempt

__all__ = ("DOMAIN_HEADERS", "SUMMARY_HEADERS", "domain_cells", "not_converted_lines", "score_words",
           "summary_cells", "summary_table")

#: The summary's columns, in order (the table's headers; the index's in lower case).
SUMMARY_HEADERS = ("SPEC", "RUNS", "PASSED", "FAILED", "ERROR", "PASS RATE [95% CI]", "STEPS", "TOKENS", "SECONDS",
                   "COST")


def summary_cells(row: dict[str, Any]) -> list[str]:
    """One summary row (cud.suite.results' per spec or total) as text, in :data:`SUMMARY_HEADERS`' order."""
    rate = "-" if row["pass_rate"] is None else \
        f"{row['pass_rate']:.0%} [{row['interval95'][0]:.0%}-{row['interval95'][1]:.0%}]"
    return [str(row["spec"]), str(row["runs"]), str(row["passed"]), str(row["failed"]), str(row.get("error", 0)), rate,
            "-" if row["mean_steps"] is None else f"{row['mean_steps']:.1f}",
            "-" if row["mean_tokens"] is None else f"{row['mean_tokens']:,.0f}",
            "-" if row["mean_seconds"] is None else f"{row['mean_seconds']:.1f}",
            "-" if row.get("cost") is None else describe_cost(row["cost"])]


#: An OSWorld suite's columns (a row per domain, then the total): RUNS are the converted tasks' runs.
DOMAIN_HEADERS = ("DOMAIN", "TASKS", "CONVERTED", "RUNS", "PASSED", "FAILED", "ERROR", "PASS RATE [95% CI]", "STEPS",
                  "TOKENS", "SECONDS", "COST")


def domain_cells(row: dict[str, Any]) -> list[str]:
    """One domain's row (or the total's) of an OSWorld suite's summary, in :data:`DOMAIN_HEADERS`' order."""
    cells = summary_cells({**row, "spec": row.get("domain", row.get("spec"))})
    runs = row["runs"] - row.get("not_converted", 0)
    return [cells[0], str(row["tasks"]), str(row["converted"]), str(runs), *cells[2:]]


def summary_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The summary's headers and rows, the total last: per spec, or an OSWorld suite's per domain (its tasks' runs
    are in results.json and the index). A suite of several models: a MODEL column first, and each model's rows
    with its total, then the total over all models (model ``all``)."""
    if "models" not in summary:
        return _group_table(summary)
    rows: list[list[str]] = []
    for group in summary["models"]:
        rows.extend([str(group["model"]), *row] for row in _group_table(group)[1])
    headers, cells = _group_table({**summary["models"][0], "total": summary["total"]})
    return ["MODEL", *headers], [*rows, ["all", *cells[-1]]]


def _group_table(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """One summary's (the suite's, or one model's) headers and rows, its total last."""
    if "domains" in summary:
        return list(DOMAIN_HEADERS), [domain_cells(r) for r in [*summary["domains"], summary["total"]]]
    return list(SUMMARY_HEADERS), [summary_cells(r) for r in [*summary["specs"], summary["total"]]]


def not_converted_lines(attempts: Iterable[Attempt]) -> list[str]:
    """What the table says under it of the OSWorld tasks that did not convert: a heading, then ``  NAME: why`` for
    each (once, whatever ``--repeat``); none if every task converted."""
    seen: dict[str, str] = {}
    for attempt in attempts:
        if attempt.not_converted:
            seen.setdefault(attempt.spec, str((attempt.error or {}).get("message")))
    lines = [f"  {name}: {why}" for name, why in seen.items()]
    return [f"not converted ({len(lines)}), never run:", *lines] if lines else []


def score_words(score: float | None) -> str:
    """A verdict's score to two decimals (``0.83``), ``-`` without one."""
    return "-" if score is None else f"{score:.2f}"
