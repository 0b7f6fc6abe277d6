"""What the metrics count (daemon/metrics.py): cheap aggregate queries over the tasks and approvals, run at
scrape time.

Rows of :class:`cud.daemon.store.database.Store`, which inherits them; they read through the store's
connection (:class:`~cud.daemon.store.connection.StoreConnection`).
"""

from __future__ import annotations

from cud.daemon.store.connection import StoreConnection
from cud.protocol import FINAL_STATES

__all__ = ("CountRows",)


class CountRows(StoreConnection):
    """The metrics' counts."""

    def task_counts(self) -> dict[str, int]:
        """How many tasks the database holds in each state."""
        rows = self._db.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall()
        return {row[0]: int(row[1]) for row in rows}

    def verdict_counts(self) -> dict[str, int]:
        """How many tasks the database holds judged ``passed`` and ``failed``."""
        rows = self._db.execute("SELECT json_extract(verdict, '$.verdict'), COUNT(*) FROM tasks"
                                " WHERE verdict IS NOT NULL GROUP BY 1").fetchall()
        return {row[0]: int(row[1]) for row in rows}

    def outcome_inputs(self) -> list[tuple[str, str | None, str | None, str | None, int]]:
        """Ended tasks grouped by what their outcome is decided by (cud.outcome.ended_outcome): state, verdict,
        their error's kind and fault; with how many."""
        rows = self._db.execute(
            "SELECT state, json_extract(verdict, '$.verdict'), json_extract(error, '$.kind'),"
            " json_extract(error, '$.details.fault'), COUNT(*) FROM tasks"
            f" WHERE state IN ({', '.join('?' * len(FINAL_STATES))}) GROUP BY 1, 2, 3, 4",
            sorted(FINAL_STATES)).fetchall()
        return [(row[0], row[1], row[2], row[3], int(row[4])) for row in rows]

    def queued_by_seat(self) -> dict[str | None, int]:
        """Queued tasks per seat they are pinned to; None holds those any seat may take."""
        rows = self._db.execute(
            "SELECT CASE WHEN pinned = 1 THEN seat END, COUNT(*) FROM tasks WHERE state = 'queued' GROUP BY 1"
        ).fetchall()
        return {row[0]: int(row[1]) for row in rows}

    def pending_approval_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM approvals WHERE state = 'pending'").fetchone()[0])
