"""What tasks spend (docs/budgets.md): a task's cost, the day's spend, raised budgets, held tasks.

The budget rows of :class:`cud.daemon.store.database.Store`, which inherits them; they are written in the
store's transactions (:class:`~cud.daemon.store.connection.StoreConnection`).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from cud.budget import format_amount
from cud.daemon.store.connection import StoreConnection
from cud.daemon.store.writes import finishing
from cud.protocol import CostView

__all__ = ("SpendRows",)


class SpendRows(StoreConnection):
    """A task's cost, the day's spend, raised budgets, held tasks."""

    @finishing
    def add_cost(self, task_id: int, total: CostView, day: str, amount: Decimal | None) -> None:
        """Record a model answer's cost: the task's total so far, and ``amount`` added to ``day``'s spend
        (in ``total``'s currency; None: unknown, nothing to add)."""
        with self._tx() as db:
            db.execute("UPDATE tasks SET cost = ? WHERE id = ?", (json.dumps(total), task_id))
            if amount is not None:
                row = db.execute("SELECT amount FROM spend WHERE day = ? AND currency = ?",
                                 (day, total["currency"])).fetchone()
                spent = format_amount((Decimal(row["amount"]) if row else Decimal(0)) + amount)
                db.execute("INSERT INTO spend (day, currency, amount) VALUES (?, ?, ?) ON CONFLICT (day, currency)"
                           " DO UPDATE SET amount = excluded.amount", (day, total["currency"], spent))

    def day_spend(self, day: str, currency: str) -> Decimal:
        """What every task spent on ``day`` (UTC, YYYY-MM-DD) in ``currency``, priced answers only."""
        row = self._db.execute("SELECT amount FROM spend WHERE day = ? AND currency = ?", (day, currency)).fetchone()
        return Decimal(row["amount"]) if row else Decimal(0)

    def cost_by_model(self) -> dict[tuple[str, str], Decimal]:
        """What the tasks the database holds cost, by (model, currency), for the metrics."""
        totals: dict[tuple[str, str], Decimal] = {}
        for row in self._db.execute("SELECT model, json_extract(cost, '$.currency') AS currency,"
                                    " json_extract(cost, '$.amount') AS amount FROM tasks"
                                    " WHERE json_extract(cost, '$.amount') IS NOT NULL"):
            key = (row["model"], row["currency"])
            totals[key] = totals.get(key, Decimal(0)) + Decimal(str(row["amount"]))
        return totals

    @finishing
    def raise_budget(self, task_id: int, key: str, limit: str | int, data: dict[str, Any]) -> None:
        """A person allowed more: the task's ``key`` (max_cost, max_input_tokens, max_output_tokens) is now
        ``limit``; the ``budget_extended`` event carries ``data``."""
        assert key in ("max_cost", "max_input_tokens", "max_output_tokens")
        with self._tx() as db:
            db.execute(f"UPDATE tasks SET {key} = ? WHERE id = ?", (limit, task_id))
            self._event(db, task_id, "budget_extended", data)

    def hold_queued(self, reason: str | None) -> None:
        """Say why queued tasks wait although a seat may be free (None: they no longer do)."""
        with self._tx() as db:
            db.execute("UPDATE tasks SET held = ? WHERE state = 'queued' AND held IS NOT ?", (reason, reason))
