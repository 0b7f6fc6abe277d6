"""One handler per request type, in one exhaustive table (checked against the protocol at import)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from cud.daemon.server.handlers import (
    approvals,
    control,
    metrics,
    ping,
    records,
    screen,
    seats,
    session,
    targets,
    tasks,
    video,
)
from cud.daemon.server.handlers.base import Context
from cud.protocol import REQUEST_TYPES

__all__ = ("HANDLERS", "Context")

Handler = Callable[[Context, Any], Awaitable[Any]]

HANDLERS: dict[str, Handler] = {
    "ping": ping.ping,
    "submit": tasks.submit,
    "list": tasks.list_tasks,
    "show": tasks.show,
    "follow": tasks.follow,
    "cancel": tasks.cancel,
    "interrupt": tasks.interrupt,
    "approvals": approvals.list_approvals,
    "approve": approvals.approve,
    "deny": approvals.deny,
    "screenshot": screen.screenshot,
    "seats": seats.list_seats,
    "inspect": targets.inspect,
    "tree": targets.tree,
    "pause": control.pause,
    "resume": control.resume,
    "act": control.act,
    "image": records.image,
    "artifact": records.artifact,
    "record": records.record,
    "video": video.video,
    "metrics": metrics.metrics,
    "exec": session.exec_command,
    "put": session.put,
    "get": session.get,
    "clipboard": session.clipboard,
    "reset": session.reset,
}

if set(HANDLERS) != REQUEST_TYPES:  # a new request type without a handler must not ship
    raise ImportError(f"handlers and protocol disagree: {sorted(set(HANDLERS) ^ REQUEST_TYPES)}")
