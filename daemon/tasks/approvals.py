"""Pending approvals: a future per approval that the runner awaits and a handler resolves.

The database row is the truth; the future only wakes the runner. Every decision
goes through :meth:`Store.decide_approval`, which moves a row out of ``pending``
at most once, so a timeout and an ``approve`` arriving together cannot both win.
"""

from __future__ import annotations

import asyncio

from cud.daemon.server.access import Peer
from cud.daemon.store.database import Store
from cud.errors import ApprovalError

__all__ = ()


class Approvals:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._waiting: dict[int, asyncio.Future[str]] = {}

    async def wait(self, approval_id: int, timeout: float) -> str:
        """Wait for a decision; returns 'approved', 'denied', 'timed_out' or 'cancelled'."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[approval_id] = future
        try:
            try:
                return await asyncio.wait_for(asyncio.shield(future), timeout)
            except TimeoutError:
                reason = f"no decision within {timeout:g} s"
                if self.store.decide_approval(approval_id, "timed_out", None, None, reason):
                    return "timed_out"
                # A decision landed in the same tick as the timeout: it wins.
                return future.result() if future.done() else self.store.approval(approval_id)["state"]
        finally:
            self._waiting.pop(approval_id, None)

    def decide(self, approval_id: int, outcome: str, peer: Peer, reason: str | None) -> None:
        """Record an approver's decision (raises NotFound, or ApprovalError if already decided)."""
        if not self.store.decide_approval(approval_id, outcome, peer.uid, peer.name, reason):
            state = self.store.approval(approval_id)["state"]
            raise ApprovalError(f"approval {approval_id} is no longer pending (it is {state})", id=approval_id,
                                state=state)
        self._wake(approval_id, outcome)

    def cancel_task(self, task_id: int, reason: str) -> None:
        """A cancelled or stopping task takes its pending approvals with it."""
        for approval in self.store.pending_approvals():
            if approval["task_id"] == task_id and self.store.decide_approval(
                approval["id"], "cancelled", None, None, reason
            ):
                self._wake(approval["id"], "cancelled")

    def _wake(self, approval_id: int, outcome: str) -> None:
        future = self._waiting.get(approval_id)
        if future is not None and not future.done():
            future.set_result(outcome)
