"""What X11 and VNC share about frames: waiting for the screen to settle, cutting
the patch around an action's target for approval binding, and the fingerprint of
a screen a task's stuck guard compares (cud.daemon.tasks.stuck).

One look at each frame: the PNG encoder already compares each band of a screenshot with
the frame before it (to reuse what did not change), so the fingerprint of the next
screenshot hashes again only the tiles of the rows the encoder found changed
(:class:`ScreenPrints`); the approval binding cuts its patches from the same frame."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

__all__ = ("FINGERPRINT_TILE", "Fingerprinter", "ScreenPrints", "settle", "patch")

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

    def __call__(self, raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int, *,
                 since: np.ndarray | None = None, rows: Sequence[tuple[int, int]] = ()) -> np.ndarray:
        """The fingerprint of a frame of 4-byte pixels, row by row: tiles in rows, left to right.

        ``since``: the fingerprint of a frame of the same size that this one differs from only within the
        pixel row ranges ``rows`` (``(first, end)``): its tiles elsewhere are kept, those rows' hashed again.
        """
        if width != self._width:
            weights = np.random.default_rng(0x5EED).integers(0, 2**63, (self.tile, width), np.uint64)
            self._weights = weights * np.uint64(2) + np.uint64(1)  # odd
            self._buffer = np.empty((self.tile, width), np.uint64)
            self._starts = np.arange(0, width, self.tile)
            self._width = width
        pixels = np.frombuffer(raw, np.uint32, count=width * height).reshape(height, width)
        across = len(self._starts)
        if since is not None and len(since) == across * -(-height // self.tile):
            printed = since.copy()
            again = sorted({top for first, end in rows for top in range(first - first % self.tile, end, self.tile)})
        else:
            printed = np.empty(across * -(-height // self.tile), np.uint64)
            again = list(range(0, height, self.tile))
        for top in again:
            band = pixels[top:top + self.tile]
            count = band.shape[0]
            np.multiply(band, self._weights[:count], out=self._buffer[:count])
            at = top // self.tile * across
            printed[at:at + across] = np.add.reduceat(self._buffer[:count].sum(axis=0), self._starts)
        return printed


class ScreenPrints:
    """A driver's fingerprints of the frames behind its screenshots, each from the one before where it can be.

    The driver tells :meth:`shot` what its encoder said of each screenshot (its ``serial`` and
    ``stale_rows``); :meth:`of` then hashes the whole frame only when the fingerprint it kept is not of the
    frame the encoder compared this one with (a ``peek`` came between, or no fingerprint was asked for).
    """

    def __init__(self) -> None:
        self._fingerprinter = Fingerprinter()
        self._shot: tuple[int, list[tuple[int, int]] | None] = (0, None)
        self._kept: tuple[int, np.ndarray] | None = None

    def shot(self, serial: int, stale_rows: list[tuple[int, int]] | None) -> None:
        """The screenshot just taken is the encoder's frame ``serial``, different from frame ``serial - 1``
        within ``stale_rows`` only (None: anywhere)."""
        self._shot = (serial, stale_rows)

    def of(self, raw: bytes | bytearray | memoryview | np.ndarray, width: int, height: int) -> np.ndarray:
        """The fingerprint of the last screenshot's frame ``raw``."""
        serial, rows = self._shot
        kept = self._kept
        if kept is not None and kept[0] == serial:
            return kept[1]
        follows = kept is not None and kept[0] == serial - 1 and rows is not None
        printed = self._fingerprinter(raw, width, height, since=kept[1] if follows and kept else None,
                                      rows=rows or ())
        self._kept = (serial, printed)
        return printed
