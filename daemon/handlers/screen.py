"""``screenshot``: the display as it is now, streamed as base64 chunks."""

from __future__ import annotations

import base64
import io

from cud.daemon.handlers.base import Context
from PIL import Image

from cud.protocol import CHUNK_BYTES, ScreenshotRequest, ScreenshotResult, chunk_message

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
    for start in range(0, len(data), CHUNK_BYTES):
        await ctx.send(dict(chunk_message(base64.b64encode(data[start : start + CHUNK_BYTES]).decode())))
    return {"width": width, "height": height, "bytes": len(data), "format": "png"}
