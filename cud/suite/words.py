"""A suite's numbers for people, the same in ``cuctl eval``'s table and the HTML index: counts, the pass rate
with its interval, means to a sensible precision, money by :func:`cud.budget.describe_cost`, scores to two
decimals. results.json keeps the exact values; nothing here is read back."""

from __future__ import annotations

from typing import Any

from cud.budget import describe_cost

__all__ = ("SUMMARY_HEADERS", "score_words", "summary_cells")

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


def score_words(score: float | None) -> str:
    """A verdict's score to two decimals (``0.83``), ``-`` without one."""
    return "-" if score is None else f"{score:.2f}"
