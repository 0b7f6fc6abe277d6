"""The price a task was accepted with: kept with the task at submit, its money lines counted by it.

A task's budget is a promise made at submit: ``max_cost`` (and the day's cap) were checked
against the model's price of that moment. The config may change before the task starts (a
queued task survives a restart into a config without its model's price, or with another
price); counting the task's spend by the config of the moment would then count it as unknown,
which no line can hold, and the task would run unbounded. So the price is stored with the
task (``tasks.price``, cud.protocol.PriceView, with its currency) and its cost is always
counted by it.

A task with no stored price (accepted before cud kept one, or of a model that had none) is
counted by the config's price, as before. If there is none and a money line needs one (its
``max_cost``, or the daemon's ``[budget] daily_cost``), the task is refused at start with a
:class:`~cud.errors.ConfigError` naming the model: never run unbounded. So is a task whose
price is in another currency than the day's cap it would count against.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import TYPE_CHECKING

from cud.budget import format_amount
from cud.daemon.budget.config import BudgetConfig, Price
from cud.errors import ConfigError

if TYPE_CHECKING:
    from cud.protocol import PriceView, TaskView

__all__ = ("Accepted", "at_submit", "counted_by")


@dataclasses.dataclass(frozen=True)
class Accepted:
    """What a task's answers are priced by, and the currency of that price (and of its max_cost)."""

    price: Price
    currency: str


def at_submit(budget: BudgetConfig, model: str) -> PriceView | None:
    """What to store with a task of ``model`` submitted now: the config's price (None: it has none)."""
    price = budget.price(model)
    if price is None:
        return None
    return {"currency": budget.currency, "input": format_amount(price.input),
            "cached_input": format_amount(price.cached_input), "output": format_amount(price.output)}


def counted_by(task: TaskView, budget: BudgetConfig) -> Accepted | None:
    """The price the task's cost is counted by: its own, else (a task from before) the config's.

    None: neither has one, and no money line needs one (the cost shows as unknown). Raises
    ConfigError where a money line would have nothing to count by: the task must not start.
    """
    stored = task.get("price")
    if stored is not None:
        accepted: Accepted | None = Accepted(
            Price(Decimal(stored["input"]), Decimal(stored["cached_input"]), Decimal(stored["output"])),
            stored["currency"])
    else:
        price = budget.price(task["model"])
        accepted = None if price is None else Accepted(price, budget.currency)
    task_id, model = task["id"], task["model"]
    if accepted is None:
        needs = ("its max_cost" if task.get("max_cost") is not None
                 else "the daemon's [budget] daily_cost" if budget.daily_cost is not None else None)
        if needs is not None:
            raise ConfigError(
                f"task {task_id} was not started: {needs} needs a price for model {model!r}; the task has none "
                "stored (it was accepted before cud kept a task's price) and the daemon's [budget.prices] has none "
                "now, so its cost could not be counted", id=task_id, model=model, config_key="budget.prices")
    elif budget.daily_cost is not None and accepted.currency != budget.currency:
        raise ConfigError(
            f"task {task_id} was not started: it was accepted with prices in {accepted.currency}, and the day's "
            f"cap ([budget] daily_cost) is in {budget.currency} now, so its spend could not be counted against it",
            id=task_id, model=model, currency=accepted.currency, config_key="budget.currency")
    return accepted
