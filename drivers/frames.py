"""What X11 and VNC share about frames: waiting for the screen to settle, and
cutting the patch around an action's target for approval binding."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

__all__ = ("settle", "patch")

F = TypeVar("F")


def settle(grab: Callable[[], F], same: Callable[[F, F], bool], timeout: float, interval: float = 0.02) -> F:
    """Grab frames until two in a row, ``interval`` apart, are identical, or ``timeout`` passes.

    Returns the last frame. A fixed sleep is either too short for a slow app or
    wasted on a fast one; comparing frames costs a memcmp.
    """
    deadline = time.monotonic() + timeout
    frame = grab()
    while time.monotonic() < deadline:
        time.sleep(interval)
        nxt = grab()
        if same(frame, nxt):
            return nxt
        frame = nxt
    return frame


def patch(raw: bytes | bytearray | memoryview, width: int, height: int, x: int, y: int, radius: int,
          bytes_per_pixel: int = 4) -> bytes:
    """The pixels of the square of ``radius`` around (x, y), clipped to the frame, row by row."""
    left, right = max(0, x - radius), min(width, x + radius + 1)
    top, bottom = max(0, y - radius), min(height, y + radius + 1)
    stride = width * bytes_per_pixel
    view = memoryview(raw)
    return b"".join(
        view[row * stride + left * bytes_per_pixel: row * stride + right * bytes_per_pixel]
        for row in range(top, bottom)
    )
