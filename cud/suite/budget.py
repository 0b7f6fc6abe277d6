"""``cuctl eval --max-cost``: what a whole suite may spend, shared out as each task's ``max_cost``.

A task is submitted with a ``max_cost`` (its *grant*): what is left of the suite's cap, shared
among the seats still free and the runs still to go, and never above the spec's own ``max_cost``.
What a task holds is the larger of its grant and what it spent (a person may approve more at
its line, docs/budgets.md), so the tasks in flight can never together take the suite past the
cap; what a finished task did not spend goes back to the rest. When nothing is left, nothing more
is submitted, and the runs left are recorded as not run. Money is Decimal throughout (cud.budget).
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable
from decimal import Decimal

from cud.budget import format_amount, parse_amount
from cud.errors import ConfigError
from cud.suite.results import Attempt

__all__ = ("SuiteBudget", "spent")

#: Grants are cut down to a millionth of the currency: a clean number on the wire, never above the share.
_GRANT_PLACES = Decimal("0.000001")


def spent(attempt: Attempt) -> Decimal:
    """What the attempt's task cost so far (0 before its first answer)."""
    amount = (attempt.cost or {}).get("amount")
    return Decimal(str(amount)) if amount is not None else Decimal(0)


class SuiteBudget:
    def __init__(self, cap: object) -> None:
        try:
            self.cap = parse_amount(cap)
        except ValueError as exc:
            raise ConfigError(f"--max-cost must be an amount of money ({exc}), got {cap!r}", key="max-cost",
                              value=repr(cap)) from None

    def committed(self, attempts: Iterable[Attempt]) -> Decimal:
        """Spent by the ended tasks, held by those in flight (the larger of grant and spend)."""
        total = Decimal(0)
        for attempt in attempts:
            held = spent(attempt)
            if attempt.grant is not None and not attempt.ended:
                held = max(held, Decimal(attempt.grant))
            total += held
        return total

    def grant(self, attempts: Iterable[Attempt], sharing: int, spec_cost: str | None) -> Decimal | None:
        """The next task's max_cost: what is left, shared by ``sharing`` tasks, within the spec's own;
        None when nothing is left."""
        left = self.cap - self.committed(attempts)
        if left <= 0:
            return None
        share = (left / max(1, sharing)).quantize(_GRANT_PLACES, rounding=decimal.ROUND_DOWN)
        if spec_cost is not None:
            share = min(share, Decimal(spec_cost))
        return share if share > 0 else None

    def words(self, attempts: Iterable[Attempt]) -> str:
        return f"--max-cost {format_amount(self.cap)} is spent or held ({format_amount(self.committed(attempts))})"
