"""``approvals``, ``approve`` and ``deny``: the human in the loop."""

from __future__ import annotations

from cud.daemon.server.handlers.base import Context
from cud.protocol import ApprovalsRequest, ApprovalView, ApproveRequest, DenyRequest

__all__ = ()


async def list_approvals(ctx: Context, request: ApprovalsRequest) -> list[ApprovalView]:
    return ctx.daemon.store.pending_approvals()


async def approve(ctx: Context, request: ApproveRequest) -> ApprovalView:
    ctx.daemon.access_rights.require_approve(ctx.peer, "approve actions")
    ctx.daemon.approvals.decide(request["id"], "approved", ctx.peer, None)
    return ctx.daemon.store.approval(request["id"])


async def deny(ctx: Context, request: DenyRequest) -> ApprovalView:
    ctx.daemon.access_rights.require_approve(ctx.peer, "deny actions")
    ctx.daemon.approvals.decide(request["id"], "denied", ctx.peer, request.get("reason") or None)
    return ctx.daemon.store.approval(request["id"])
