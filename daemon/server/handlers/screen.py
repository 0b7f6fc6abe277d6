"""``screenshot``: the display as it is now, streamed as base64 chunks."""

from __future__ import annotations

import io

from PIL import Image

from cud.daemon.server.handlers.base import Context
from cud.protocol import ScreenshotRequest, ScreenshotResult

__all__ = ()


async def screenshot(ctx: Context, request: ScreenshotRequest) -> ScreenshotResult:
    seat = ctx.daemon.seats.pick(request.get("seat"), "a screenshot")
    extension, data = await seat.screenshot()
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
        if extension != "png":  # the wire promises PNG whatever the driver produced
            out = io.BytesIO()
            image.save(out, format="PNG")
            data = out.getvalue()
    await ctx.send_chunks(data)
    return {"width": width, "height": height, "bytes": len(data), "format": "png"}
