"""``inspect`` and ``tree``: what a seat's accessibility bus says is where, read-only.

Like ``screenshot``, they need only the right to connect (read rights): they
show what is on the screen, and change nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from cud.daemon.server.handlers.base import Context
from cud.drivers.actions import check_point
from cud.errors import AccessibilityError
from cud.protocol import InspectRequest, TreeRequest

__all__ = ("TREE_COUNT", "TREE_DEPTH")

#: What `cuctl tree` shows unless asked for more (the protocol caps both).
TREE_DEPTH = 8
TREE_COUNT = 500
#: Seconds a look by hand may take (a person waits for it; no task does).
LOOK_TIMEOUT = 10.0


async def inspect(ctx: Context, request: InspectRequest) -> dict[str, Any]:
    seat = ctx.daemon.seats.pick(request.get("seat"), "inspect")
    if seat.size is not None:  # an unavailable seat's screen is not known: the lookup says what it can
        check_point(request["x"], request["y"], seat.size)
    result = await seat.targets.inspect(request["x"], request["y"])
    return {"seat": seat.name, **result}


async def tree(ctx: Context, request: TreeRequest) -> dict[str, Any]:
    seat = ctx.daemon.seats.pick(request.get("seat"), "tree")
    try:
        result = await asyncio.wait_for(
            seat.targets.tree(request.get("app"), request.get("depth", TREE_DEPTH), request.get("count", TREE_COUNT)),
            LOOK_TIMEOUT)
    except TimeoutError:
        raise AccessibilityError(f"the accessibility bus of seat {seat.name!r} did not give its tree within "
                                 f"{LOOK_TIMEOUT:g} s", seat=seat.name) from None
    return {"seat": seat.name, **result}
