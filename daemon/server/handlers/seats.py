"""``seats``: every seat, its state, its task and its screen size."""

from __future__ import annotations

from cud.daemon.server.handlers.base import Context
from cud.protocol import SeatsRequest, SeatView

__all__ = ()


async def list_seats(ctx: Context, request: SeatsRequest) -> list[SeatView]:
    # From what the seats know already: a busy or hung display is never asked.
    return ctx.daemon.seats.views()
