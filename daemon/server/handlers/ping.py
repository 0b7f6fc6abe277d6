"""``ping``: is the daemon alive, which protocol does it speak, and what may I do?"""

from __future__ import annotations

import os

import cud
from cud.daemon.server.handlers.base import Context
from cud.protocol import PROTOCOL_VERSION, PingRequest, PingResult

__all__ = ()


async def ping(ctx: Context, request: PingRequest) -> PingResult:
    rights = ctx.daemon.access_rights
    return {
        "protocol": PROTOCOL_VERSION,
        "version": cud.__version__,
        "pid": os.getpid(),
        "peer": {"uid": ctx.peer.uid, "name": ctx.peer.name},
        "may_submit": rights.may_submit(ctx.peer),
        "may_approve": rights.may_approve(ctx.peer),
        "may_operate": rights.may_operate(ctx.peer),
    }
