"""What X11 and VNC share about frames: waiting for the screen to settle, cutting
the patch around an action's target for approval binding, and the fingerprint of
a screen a task's stuck guard compares (cud.daemon.tasks.stuck)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

__all__ = ("FINGERPRINT_TILE", "Fingerprinter", "settle", "patch")

#: Side of a fingerprint's square tiles, in pixels: a caret or a clock's digits touch one or two.
FINGERPRINT_TILE = 32

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


def patch(raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int, x: int, y: int, radius: int,
          bytes_per_pixel: int = 4) -> bytes:
    """The pixels of the square of ``radius`` around (x, y), clipped to the frame, row by row."""
    left, right = max(0, x - radius), min(width, x + radius + 1)
    top, bottom = max(0, y - radius), min(height, y + radius + 1)
    stride = width * bytes_per_pixel
    view = raw.data if isinstance(raw, np.ndarray) else memoryview(raw)  # ndarray.data: its memoryview
    return b"".join(
        view[row * stride + left * bytes_per_pixel: row * stride + right * bytes_per_pixel]
        for row in range(top, bottom)
    )


class Fingerprinter:
    """One 64-bit hash per square tile of a frame: a screen's fingerprint, 8 bytes a tile.

    A tile's hash is the sum, modulo 2**64, of its 32-bit pixels each times a fixed random
    odd weight for its place in the tile. An odd weight is invertible modulo 2**64, so a
    change of one pixel always changes the hash, and a caret that moves inside its tile
    changes it too (a plain sum would not). The frame is read where it lies, one band of
    tile rows at a time into a buffer kept between calls: no copy of the frame.
    """

    def __init__(self, tile: int = FINGERPRINT_TILE) -> None:
        self.tile = tile
        self._width = -1
        self._weights = np.empty((0, 0), np.uint64)
        self._buffer = np.empty((0, 0), np.uint64)
        self._starts = np.empty(0, np.intp)

    def __call__(self, raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int) -> np.ndarray:
        """The fingerprint of a frame of 4-byte pixels, row by row: tiles in rows, left to right."""
        if width != self._width:
            weights = np.random.default_rng(0x5EED).integers(0, 2**63, (self.tile, width), np.uint64)
            self._weights = weights * np.uint64(2) + np.uint64(1)  # odd
            self._buffer = np.empty((self.tile, width), np.uint64)
            self._starts = np.arange(0, width, self.tile)
            self._width = width
        pixels = np.frombuffer(raw, np.uint32, count=width * height).reshape(height, width)
        bands = []
        for top in range(0, height, self.tile):
            band = pixels[top:top + self.tile]
            rows = band.shape[0]
            np.multiply(band, self._weights[:rows], out=self._buffer[:rows])
            bands.append(np.add.reduceat(self._buffer[:rows].sum(axis=0), self._starts))
        return np.concatenate(bands)
