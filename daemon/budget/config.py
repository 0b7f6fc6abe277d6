"""``[budget]`` and its price table, and the per-task budget keys' default and ceiling.

::

    max_cost = 2.00                 # top level, beside max_steps: each task's default and ceiling
    max_input_tokens = 2_000_000
    max_output_tokens = 50_000

    [budget]
    currency = "USD"                # what the prices and every amount are in (three letters)
    daily_cost = 50                 # the day's spend over all tasks (UTC days)
    on_budget = "ask"               # at 100% of a budget: "ask" a person, or "fail" the task

    [budget.prices."gpt-5.4"]       # per million tokens; cud ships no prices
    input = 2.50
    cached_input = 0.25             # default: input's price (never a guess below it)
    output = 15.00

Every amount is a :class:`~decimal.Decimal` (cud.money); a bad one is a ConfigError naming its key.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from cud.budget import MAX_TOKENS_LIMIT, parse_amount
from cud.daemon.config_values import bad, int_in_range
from cud.daemon.config_values import table as checked_table

__all__ = ("BUDGET_KEYS", "ON_BUDGET", "PRICE_KEYS", "BudgetConfig", "Price", "amount", "load_budget", "tokens")

BUDGET_KEYS = frozenset({"currency", "daily_cost", "on_budget", "prices"})
PRICE_KEYS = frozenset({"input", "cached_input", "output"})
ON_BUDGET = ("ask", "fail")
_CURRENCY = re.compile(r"[A-Za-z]{3}")
#: More models than any contract prices; a bound so a generated file cannot make the table huge.
_MAX_PRICES = 1000


@dataclasses.dataclass(frozen=True)
class Price:
    """A model's price per million tokens: input, the cached part of the input, output."""

    input: Decimal
    cached_input: Decimal
    output: Decimal


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    currency: str = "USD"
    #: The cap on the day's spend (UTC) over all tasks; None: no cap.
    daily_cost: Decimal | None = None
    #: What happens at 100% of a budget: "ask" (an approval of kind budget) or "fail" (budget_exceeded).
    on_budget: str = "ask"
    prices: Mapping[str, Price] = dataclasses.field(default_factory=dict, hash=False)

    def price(self, model: str) -> Price | None:
        return self.prices.get(model)


def amount(key: str, value: object, *, allow_zero: bool = False) -> Decimal:
    """An amount of money at config key ``key``."""
    try:
        return parse_amount(value, allow_zero=allow_zero)
    except ValueError as exc:
        raise bad(key, value, f"an amount of money: {exc}") from None


def tokens(key: str, value: object) -> int:
    """A number of tokens at config key ``key``."""
    return int_in_range(key, value, 1, MAX_TOKENS_LIMIT)


def _price(key: str, value: object) -> Price:
    table = checked_table(key, value, PRICE_KEYS)
    for needed in ("input", "output"):
        if needed not in table:
            raise bad(f"{key}.{needed}", None, "a price per million tokens (the key is missing)")
    given = {name: amount(f"{key}.{name}", table[name], allow_zero=True) for name in table}
    return Price(input=given["input"], cached_input=given.get("cached_input", given["input"]), output=given["output"])


def load_budget(value: object) -> BudgetConfig:
    table = checked_table("budget", value, BUDGET_KEYS)
    values: dict[str, Any] = {}
    if "currency" in table:
        if not isinstance(table["currency"], str) or not _CURRENCY.fullmatch(table["currency"]):
            raise bad("budget.currency", table["currency"], "a currency's three-letter code, like \"USD\"")
        values["currency"] = table["currency"].upper()
    if "daily_cost" in table:
        values["daily_cost"] = amount("budget.daily_cost", table["daily_cost"])
    if "on_budget" in table:
        if table["on_budget"] not in ON_BUDGET:
            raise bad("budget.on_budget", table["on_budget"], "\"ask\" or \"fail\"")
        values["on_budget"] = table["on_budget"]
    if "prices" in table:
        prices = table["prices"]
        if not isinstance(prices, dict):
            raise bad("budget.prices", prices, "a table of models, each a table of prices")
        if len(prices) > _MAX_PRICES:
            raise bad("budget.prices", f"{len(prices)} models", f"at most {_MAX_PRICES} models")
        values["prices"] = {model: _price(f"budget.prices.\"{model}\"", price) for model, price in prices.items()}
    return BudgetConfig(**values)
