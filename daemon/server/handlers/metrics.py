"""``metrics``: the daemon's metrics in the Prometheus text format (read rights, like ``list``)."""

from __future__ import annotations

from cud.daemon.server.handlers.base import Context
from cud.protocol import MetricsRequest

__all__ = ()


async def metrics(ctx: Context, request: MetricsRequest) -> str:
    # No check beyond the server's: every peer it admits (submit or approve rights) may read,
    # as for list and show. The text holds counts and seat names, never a prompt.
    return ctx.daemon.metrics.text()
