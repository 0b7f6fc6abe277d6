"""Binding an approval to the screen the approver saw, through carets, spinners and clocks.

An approved pointer action runs only if the square around its target still
shows what the approver saw. Some pixels change with nobody acting: a text
caret blinks (Chromium every 530 ms, GTK 600 ms, Tk 300/600 ms), a spinner
turns, a clock ticks. Comparing every pixel refused most approved clicks into
text fields. So while an approval waits, :class:`ScreenWatch` samples each
target's square and counts, per pixel, how often it changed between samples
(the approved frame is the first sample). A pixel that changed twice or more
came and went by itself: it is *volatile* and not compared. Everything that
changed once and stayed is compared as before, so a window covering the
target, a label rewritten ("Cancel" becoming "Delete") or a button moved away
still refuses the action.

A change seen only once may be the first half of a blink: at check time the
watch keeps sampling until the square matches, or until it has watched for
``OBSERVE_SECONDS`` in all and ``CONFIRM_SECONDS`` since the check began — long
enough for any of those carets to blink back. A square that is mostly
volatile (``MAX_VOLATILE``) is refused: something animates under the target.

:func:`changed_outside_volatile` is the one answer to "did the screen change?"
given what changes by itself: the binding asks it about a target's pixels, the
stuck guard (:mod:`cud.daemon.tasks.stuck`) about a whole screen's tiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import numpy as np

__all__ = ("MAX_VOLATILE", "ScreenWatch", "changed_outside_volatile")

#: Seconds between samples while an approval waits (a full-screen grab and a memcmp each).
SAMPLE_INTERVAL = 0.05
#: Watch at least this long in all before refusing: over one whole blink of every caret above.
OBSERVE_SECONDS = 1.5
#: And at least this long after the check began, so a change that first showed up
#: just before it can prove to be a blink (half of GTK's blink cycle).
CONFIRM_SECONDS = 0.6
#: More than this share of a square changing by itself is an animation, not a caret.
MAX_VOLATILE = 0.5


def changed_outside_volatile(reference: np.ndarray, now: np.ndarray, volatile: np.ndarray) -> bool:
    """Whether ``now`` differs from ``reference`` where the screen does not change by itself.

    Both are arrays of cells (a target's pixels, a screen's tiles); ``volatile`` marks
    the cells seen changing by themselves. A different shape (a resized screen) is a
    change, and so is a mostly volatile area: something animates there.
    """
    if now.shape != reference.shape or volatile.shape != reference.shape:
        return True
    if volatile.size and volatile.mean() > MAX_VOLATILE:
        return True
    return bool(((now != reference) & ~volatile).any())


class _Target:
    def __init__(self, point: tuple[int, int], approved: bytes) -> None:
        self.point = point
        self.approved = np.frombuffer(approved, np.uint32)  # one cell a 4-byte pixel
        self.last = self.approved
        self.changes = np.zeros(len(self.approved), np.uint8)

    def observe(self, now: bytes) -> None:
        frame = np.frombuffer(now, np.uint32)
        if frame.shape != self.approved.shape:  # the screen was resized: nothing lines up any more
            self.last = frame
            return
        if self.last.shape == frame.shape:
            np.minimum(self.changes + (frame != self.last), 2, out=self.changes)
        self.last = frame

    def changed(self) -> bool:
        """Whether the square differs from the approved one in a pixel that does not change by itself."""
        return changed_outside_volatile(self.approved, self.last, self.changes >= 2)


class ScreenWatch:
    """Learns, while an approval waits, which pixels around its targets change by themselves."""

    def __init__(self, driver: Any, points: list[tuple[int, int]], radius: int) -> None:
        self.driver = driver  # cud.drivers.aio.AsyncDriver
        self.radius = radius
        self.points = list(dict.fromkeys(points))
        self._targets: dict[tuple[int, int], _Target] = {}
        self._task: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    async def start(self) -> None:
        for point in self.points:
            await self._target(point)
        self._task = asyncio.create_task(self._sample_forever(), name="approval-screen-watch")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def changed_point(self, points: list[tuple[int, int]]) -> tuple[int, int] | None:
        """The first of ``points`` whose square really changed since approval, or None if none did."""
        await self.stop()
        began = time.monotonic()
        targets = [await self._target(point) for point in dict.fromkeys(points)]
        while True:
            await self._sample(targets)
            changed = [t for t in targets if t.changed()]
            if not changed:
                return None
            now = time.monotonic()
            if now - self._started >= OBSERVE_SECONDS and now - began >= CONFIRM_SECONDS:
                return changed[0].point
            await asyncio.sleep(SAMPLE_INTERVAL)

    async def _target(self, point: tuple[int, int]) -> _Target:
        if point not in self._targets:
            x, y = point
            approved = await self.driver.call("target_patch", x, y, self.radius, from_last_screenshot=True)
            self._targets[point] = _Target(point, approved)
        return self._targets[point]

    async def _sample(self, targets: list[_Target]) -> None:
        for target in targets:
            x, y = target.point
            target.observe(await self.driver.call("target_patch", x, y, self.radius, from_last_screenshot=False))

    async def _sample_forever(self) -> None:
        targets = list(self._targets.values())
        while True:
            await self._sample(targets)
            await asyncio.sleep(SAMPLE_INTERVAL)
