"""A task's budgets on both sides of the socket: its keys, their limits, and money.

Money is :class:`decimal.Decimal`, never a float, so sums of many small costs are exact.

On the wire and in the database an amount is a decimal string (``"0.003125"``); a config or a
spec may write a number (TOML and JSON have no decimals), which is read through its shortest
``repr`` (``0.1`` is ``Decimal("0.1")``, not the binary fraction). Shared by the daemon, which
computes costs, and the clients, which show them.
"""

from __future__ import annotations

import decimal
from decimal import Decimal

__all__ = ("BUDGET_TASK_KEYS", "MAX_AMOUNT", "MAX_TOKENS_LIMIT", "NO_PRICE", "describe_budgets", "describe_cost",
           "describe_price", "describe_step_cost", "unknown_cost",
           "format_amount", "format_money", "parse_amount")

#: A task's budgets, beside max_steps and max_duration: in cuctl submit's flags, a spec's keys, the
#: submit request, the daemon's config (each task's default and ceiling) and TaskView.
BUDGET_TASK_KEYS = ("max_cost", "max_input_tokens", "max_output_tokens")
#: The most tokens a budget may name (far beyond any task; a bound so the number stays an integer anywhere).
MAX_TOKENS_LIMIT = 10 ** 12

#: Why a cost is unknown, before the model's name in quotes: ``no price for model 'x'`` (cud.daemon.budget.cost).
NO_PRICE = "no price for model "

#: The largest amount cud takes anywhere (a price per million tokens, a budget, a cap).
MAX_AMOUNT = Decimal(10) ** 9
#: Amounts are kept to this many decimal places (a millionth of a cent would not show anywhere).
_PLACES = 12
#: How currencies people know by a sign are shown; any other is written after the amount.
_SIGNS = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥"}


def parse_amount(value: object, *, allow_zero: bool = False) -> Decimal:
    """A finite amount >= 0 (> 0 unless ``allow_zero``) up to :data:`MAX_AMOUNT`, from a number or a
    decimal string; ValueError says what is wrong (the caller names the key)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("a number or a decimal string")
    try:
        amount = Decimal(repr(value) if isinstance(value, float) else str(value).strip())
    except decimal.InvalidOperation:
        raise ValueError("a number or a decimal string") from None
    if not amount.is_finite():
        raise ValueError("a finite number")
    if amount < 0 or (amount == 0 and not allow_zero):
        raise ValueError("a number >= 0" if allow_zero else "a number > 0")
    if amount > MAX_AMOUNT:
        raise ValueError(f"at most {MAX_AMOUNT:,}")
    if amount != amount.quantize(Decimal(1).scaleb(-_PLACES), rounding=decimal.ROUND_HALF_EVEN):
        raise ValueError(f"at most {_PLACES} decimal places")
    return amount


def format_amount(amount: Decimal) -> str:
    """The exact decimal string of an amount, as the wire and the database hold it (no exponent)."""
    text = f"{amount:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_money(amount: Decimal | str, currency: str) -> str:
    """For people: to the cent ("$2.00", "$0.83", "2.50 CHF"); an amount under ten cents to two significant
    digits ("$0.075", "$0.0031"), so that a small cost or a price never reads as "$0.00". The exact amount
    is the wire's and results.json's (:func:`format_amount`)."""
    value = Decimal(amount)
    if value and value.copy_abs() < Decimal("0.1"):
        value = value.quantize(Decimal(1).scaleb(value.adjusted() - 1), rounding=decimal.ROUND_HALF_EVEN)
        shown = f"{value:,f}"
        while len(shown.split(".")[1]) > 2 and shown.endswith("0"):
            shown = shown[:-1]
    else:
        shown = f"{value:,.2f}"
    sign = _SIGNS.get(currency.upper())
    return f"{sign}{shown}" if sign else f"{shown} {currency}"


def describe_cost(cost: object) -> str:
    """A task's or a step's cost (cud.protocol.CostView) for people: "$0.0123", "unknown (no price for
    model 'x')", or "none yet" before the model's first answer."""
    if not isinstance(cost, dict):
        return "none yet"
    if cost.get("amount") is None:
        return f"unknown ({cost.get('unknown') or 'no price'})"
    return format_money(str(cost["amount"]), str(cost.get("currency") or ""))


def unknown_cost(cost: object) -> bool:
    """Whether a cost (cud.protocol.CostView) is known not to be known: the model has no price."""
    return isinstance(cost, dict) and cost.get("amount") is None


def describe_step_cost(cost: object, total: object, *, reason_said: bool = False) -> str:
    """A step's cost and the task's so far ("cost $0.01, $0.05 so far"). Unknown, it is said once: "cost
    unknown (no price for model 'x')", without the reason when an earlier line of the task said it."""
    if unknown_cost(total):
        assert isinstance(total, dict)
        return "cost unknown" + ("" if reason_said else f" ({total.get('unknown') or 'no price'})")
    return f"cost {describe_cost(cost)}, {describe_cost(total)} so far"


def describe_price(price: object) -> str:
    """The price a task was accepted with (cud.protocol.PriceView) for people, per million tokens; "-": none kept."""
    if not isinstance(price, dict):
        return "-"
    currency = str(price.get("currency") or "")
    return (f"{format_money(str(price['input']), currency)} input, {format_money(str(price['cached_input']), currency)}"
            f" cached input, {format_money(str(price['output']), currency)} output, per million tokens")


def describe_budgets(task: dict[str, object]) -> str:
    """A task's budgets in words ("$2.00, 50,000 output tokens"), "none" without any."""
    parts = []
    # The currency of the task's cost, else of the price it was accepted with (before its first answer).
    cost, price = task.get("cost"), task.get("price")
    priced = cost if isinstance(cost, dict) and cost.get("currency") else price if isinstance(price, dict) else {}
    currency = str(priced.get("currency") or "")
    if task.get("max_cost") is not None:
        # Before the first answer a task has no cost, so no currency to show: the amount as the daemon keeps it.
        parts.append(format_money(str(task["max_cost"]), currency) if currency else f"max_cost {task['max_cost']}")
    for key, words in (("max_input_tokens", "input tokens"), ("max_output_tokens", "output tokens")):
        if isinstance(task.get(key), int):
            parts.append(f"{task[key]:,} {words}")
    return ", ".join(parts) or "none"
