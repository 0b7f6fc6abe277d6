"""The budgets of one running task: what its model's answers cost, the warning, and the line.

The task's checkpoint (:mod:`cud.daemon.tasks.checkpoint`) reports each answer's tokens
(:meth:`BudgetMeter.answered`) and asks before each request to the model
(:meth:`BudgetMeter.before_request`), whatever the model's API: the money is spent by the request,
so the line is met before it. An answer may cross a line; the next request does not go out.

Budgets (each a :class:`Line`): the task's ``max_cost``, ``max_input_tokens`` and
``max_output_tokens``, and the day's cap (``[budget] daily_cost``, over every task). At 80% of a
line a ``budget_warning`` event, before the request that would cross it where the meter can tell
(the next request is guessed to cost what the task's last one did), else with the answer that
crossed it; at 100% a ``budget_reached`` event and then, with ``on_budget = "ask"``, an approval of
kind ``budget`` (approved: the line moves to what was used plus its first amount, so the next
request always goes out; denied or timed out: the task ends ``budget_exceeded``), or with
``"fail"`` that end at once.

Money is counted by the price the task was accepted with (:mod:`cud.daemon.budget.accepted`), in
its currency; a task whose money line has no price to count by raises ConfigError here, before it
starts (the seat then refuses it): no line is ever left unbounded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cud.budget import format_amount, format_money
from cud.daemon.budget.accepted import counted_by
from cud.daemon.budget.cost import cost_of, cost_view
from cud.errors import BudgetExceeded

if TYPE_CHECKING:
    from cud.daemon.tasks.runner import TaskRun

__all__ = ("WARN_AT", "BudgetMeter", "Line", "today")

#: The share of a budget at which the warning event comes.
WARN_AT = Decimal("0.8")
_TOKEN_BUDGETS = {"max_input_tokens": "input_tokens", "max_output_tokens": "output_tokens"}


def today() -> str:
    """The day the spend is counted in: UTC, so a daemon's day does not move with its time zone."""
    return datetime.now(UTC).date().isoformat()


@dataclasses.dataclass
class Line:
    """One budget of a running task: where it stands now, and what an approval adds."""

    budget: str  # max_cost, max_input_tokens, max_output_tokens or daily_cost
    limit: Decimal
    more: Decimal
    warned: bool = False
    #: What the task's last answer added to it: the guess of what its next request adds.
    last: Decimal = Decimal(0)

    def extended(self, used: Decimal) -> Decimal:
        """The line an approval sets: what was used plus the first amount, never less than one step up."""
        return max(self.limit, used) + self.more


class BudgetMeter:
    def __init__(self, run: TaskRun) -> None:
        self.run = run
        task, config = run.task, run.seat.config
        self.config = config.budget
        self.model = task["model"]
        accepted = counted_by(task, self.config)  # ConfigError: a money line with no price to count by
        self.price = None if accepted is None else accepted.price
        #: The currency of the task's price and of its max_cost (the day's cap's too: accepted checks so).
        self.currency = self.config.currency if accepted is None else accepted.currency
        self.tokens = {"input_tokens": 0, "cached_tokens": 0, "output_tokens": 0}
        self.spent: Decimal | None = Decimal(0) if self.price is not None else None
        self.lines: list[Line] = []
        if (max_cost := task.get("max_cost")) is not None:
            self.lines.append(Line("max_cost", Decimal(max_cost), Decimal(max_cost)))
        for key in _TOKEN_BUDGETS:
            if task.get(key) is not None:
                self.lines.append(Line(key, Decimal(task[key]), Decimal(task[key])))  # type: ignore[literal-required]  # a key of _TOKEN_BUDGETS
        if self.config.daily_cost is not None and self.price is not None:
            self.lines.append(Line("daily_cost", self.config.daily_cost, self.config.daily_cost))

    # -- counting ---------------------------------------------------------------------------
    def answered(self, tokens: dict[str, int]) -> None:
        """One answer of the model came back with these token counts: cost it, then warn where due."""
        for key in self.tokens:
            self.tokens[key] += int(tokens.get(key, 0))
        amount = None
        if self.price is not None and self.spent is not None:
            with decimal.localcontext(prec=60):  # exact: no product of a price and a count needs more
                amount = cost_of(tokens, self.price)
                self.spent += amount
        self.run.store.add_cost(self.run.task["id"], cost_view(self.spent, self.model, self.currency), today(), amount)
        for line in self.lines:
            line.last = ((amount or Decimal(0)) if line.budget in ("max_cost", "daily_cost")
                         else Decimal(int(tokens.get(_TOKEN_BUDGETS[line.budget], 0))))
            self._warn(line, self.used(line), Decimal(0))  # crossed with no warning before: now, after the fact

    def _warn(self, line: Line, used: Decimal, next_request: Decimal) -> None:
        """The 80% warning, once per line: when ``used`` plus ``next_request`` (a guess) reaches it."""
        if line.warned or used + next_request < WARN_AT * line.limit:
            return
        line.warned = True
        more: dict[str, Any] = {"share": int(WARN_AT * 100)}
        if next_request and used < WARN_AT * line.limit:
            more["expected"] = self._number(line, used + next_request)
            more["message"] = (f"{self.words(line, used)}; its next request, if it uses what its last did "
                               f"({self.amount(line, next_request)}), takes it to {self.amount(line, used + next_request)}")
        self._event("budget_warning", line, used, **more)

    def used(self, line: Line) -> Decimal:
        if line.budget == "max_cost":
            return self.spent or Decimal(0)
        if line.budget == "daily_cost":
            return self.run.store.day_spend(today(), self.currency)
        return Decimal(self.tokens[_TOKEN_BUDGETS[line.budget]])

    # -- the line ---------------------------------------------------------------------------
    async def before_request(self) -> None:
        """Before a request to the model: at a line, ask a person or end the task (raises BudgetExceeded)."""
        for line in self.lines:
            used = self.used(line)
            while used >= line.limit:
                await self._at_line(line, used)
                used = self.used(line)
            self._warn(line, used, line.last)  # before the request that would cross 80%, as far as one can tell

    async def _at_line(self, line: Line, used: Decimal) -> None:
        run, task_id = self.run, self.run.task["id"]
        said = self.words(line, used)
        self._event("budget_reached", line, used, on_budget=self.config.on_budget)
        if self.config.on_budget == "fail":
            self._end(f"{said}; the task was ended ([budget] on_budget is \"fail\")", line, used)
        ledger = run.ledger
        assert ledger.step is not None
        question = (f"{said}; approve to allow another {self.amount(line, line.more)} "
                    f"(a line of {self.amount(line, line.extended(used))})")
        timeout = run.seat.config.approval_timeout
        started = time.monotonic()
        approval = run.store.create_approval(
            task_id, "budget", [{"id": f"budget-{line.budget}", "code": line.budget, "message": question}], [],
            ledger.step.number, ledger.last_screenshot, timeout, [])
        outcome = await run.seat.approvals.wait(approval["id"], timeout)
        ledger.add_approval_ms((time.monotonic() - started) * 1000)
        if outcome == "approved":
            line.limit = line.extended(used)
            line.warned = False
            data = self._data(line, used)
            if line.budget == "daily_cost":  # this task's allowance over the day's cap, not the cap itself
                run.store.add_event(task_id, "budget_extended", data)
            else:
                stored: str | int = format_amount(line.limit) if line.budget == "max_cost" else int(line.limit)
                run.store.raise_budget(task_id, line.budget, stored, data)
            return
        if outcome == "cancelled":
            raise asyncio.CancelledError  # the run's cancel reason decides how it ends
        why = run.seat.approvals.refusal(approval["id"], outcome, timeout, about=" for more")
        self._end(f"{said}; {why}", line, used)

    def _end(self, message: str, line: Line, used: Decimal) -> None:
        error = BudgetExceeded(message, budget=line.budget, limit=self._number(line, line.limit),
                               used=self._number(line, used))
        self.run.over_budget = error
        raise error

    # -- words ------------------------------------------------------------------------------
    def amount(self, line: Line, value: Decimal) -> str:
        if line.budget in ("max_cost", "daily_cost"):
            return format_money(value, self.currency)
        return f"{int(value):,} {_TOKEN_BUDGETS[line.budget].replace('_', ' ')}"

    def words(self, line: Line, used: Decimal) -> str:
        """"task 42 has spent $2.00 of $2.00" and its kin, for the event, the approval and the error."""
        task_id = self.run.task["id"]
        if line.budget == "max_cost":
            return f"task {task_id} has spent {self.amount(line, used)} of {self.amount(line, line.limit)}"
        if line.budget == "daily_cost":
            return (f"the day's spend is {self.amount(line, used)} of {self.amount(line, line.limit)} "
                    f"([budget] daily_cost, for task {task_id})")
        return f"task {task_id} has used {self.amount(line, used)} of {self.amount(line, line.limit)}"

    def _number(self, line: Line, value: Decimal) -> str | int:
        return format_amount(value) if line.budget in ("max_cost", "daily_cost") else int(value)

    def _data(self, line: Line, used: Decimal, **more: Any) -> dict[str, Any]:
        step = self.run.ledger.step.number if self.run.ledger.step is not None else None
        data: dict[str, Any] = {"step": step, "budget": line.budget, "limit": self._number(line, line.limit),
                                "used": self._number(line, used), "message": self.words(line, used), **more}
        if line.budget in ("max_cost", "daily_cost"):
            data["currency"] = self.currency
        return data

    def _event(self, kind: str, line: Line, used: Decimal, **more: Any) -> None:
        self.run.store.add_event(self.run.task["id"], kind, self._data(line, used, **more))

    def costs(self, step: dict[str, Any]) -> dict[str, Any]:
        """A step event's ``cost`` (its answers') and ``total_cost`` (the task's so far), as CostViews."""
        amount = None
        if self.price is not None:
            with decimal.localcontext(prec=60):
                amount = cost_of(step, self.price)
        return {"cost": cost_view(amount, self.model, self.currency),
                "total_cost": cost_view(self.spent, self.model, self.currency)}
