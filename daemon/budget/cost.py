"""The one place a cost is computed: token counts times the model's price per million tokens.

The Responses API counts ``input_tokens`` with the cached part inside it; the cached part is
priced at ``cached_input``, the rest at ``input``. Everything is :class:`~decimal.Decimal`, so a
task's cost is the exact sum of its answers' costs, and the day's spend the exact sum of those.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from cud.budget import NO_PRICE, format_amount
from cud.daemon.budget.config import Price
from cud.protocol import CostView

__all__ = ("MILLION", "cost_of", "cost_view", "unknown_cost")

MILLION = Decimal(1_000_000)


def cost_of(tokens: Mapping[str, int], price: Price) -> Decimal:
    """The cost of ``tokens`` (``input_tokens``, of which ``cached_tokens``, and ``output_tokens``)."""
    given = int(tokens.get("input_tokens", 0))
    cached = min(int(tokens.get("cached_tokens", 0)), given)
    output = int(tokens.get("output_tokens", 0))
    return ((given - cached) * price.input + cached * price.cached_input + output * price.output) / MILLION


def unknown_cost(model: str) -> str:
    return f"{NO_PRICE}{model!r}"


def cost_view(amount: Decimal | None, model: str, currency: str) -> CostView:
    """An amount in ``currency`` as the protocol carries it; None: the model has no price to count by."""
    if amount is None:
        return {"amount": None, "currency": currency, "unknown": unknown_cost(model)}
    return {"amount": format_amount(amount), "currency": currency, "unknown": None}
