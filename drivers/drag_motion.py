"""How the pointer moves between a drag's points: one schedule for every driver.

Models send a drag as a handful of points (usually 2-4). Sent as they are, a
toolkit sees the button go down and the pointer jump to the end: GTK and Qt never
pass their drag threshold while the button is held, and Chromium, whose HTML5
drag runs an XDND session against itself, sees the release before the drop zone
has answered the first position (measured: with 2 points no driver dropped, with
4 some runs did not). A person's drag is what toolkits are written for, so the
driver makes one out of the model's path:

- the press, held ``BUTTON_HOLD_SECONDS`` (a click's hold) before the first motion;
- small steps (``THRESHOLD_STEP_PIXELS``) along the path until the pointer is
  ``THRESHOLD_PIXELS`` from where it was pressed, past every toolkit's drag
  threshold (GTK's ``gtk-dnd-drag-threshold`` 8 px, Qt's ``startDragDistance``
  10 px, Blink's 4 px), then ``DRAG_START_SECONDS`` for the toolkit to start its
  drag session (a pointer grab, an XDND source) while the pointer is still near
  the source;
- the rest of the path in steps of at most ``STEP_PIXELS``, one every
  ``STEP_SECONDS`` (a mouse reports at 60-125 Hz), so every segment is
  crossed as a line, not a jump, and a drop target sees the pointer enter;
- over the last point, ``HOVER_STEPS`` 1-pixel steps off it and back, a
  ``HOVER_SECONDS`` apart (positions the target answers with the drag already
  over it), then ``DWELL_SECONDS`` before the release, so ``dragover`` has been
  answered "yes" before the release asks for the ``drop``.

The path keeps its shape: every model point is visited, in order, and every step
lies on the segment it belongs to. Time is bounded: a long path is sent in at
most ``MAX_TICKS`` paced ticks (and the hover), several points per tick (each still sent), so
even a 1024-point path moves for about two seconds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from .actions import BUTTON_HOLD_SECONDS

__all__ = (
    "Tick",
    "DragMotion",
    "drag_motion",
    "THRESHOLD_PIXELS",
    "THRESHOLD_STEP_PIXELS",
    "STEP_PIXELS",
    "STEP_SECONDS",
    "DRAG_START_SECONDS",
    "DWELL_SECONDS",
    "HOVER_STEPS",
    "HOVER_SECONDS",
    "MAX_TICKS",
)

Point = tuple[int, int]

#: How far from the press the pointer goes in small steps before the drag proper: past
#: GTK's 8 px (it compares |dx| and |dy|), Qt's 10 px (Manhattan length) and Blink's 4 px
#: for any direction, with room for a desktop that raised its threshold a little.
THRESHOLD_PIXELS = 16
THRESHOLD_STEP_PIXELS = 4
#: The longest step after the threshold. Toolkits see a line, not a jump, and a drop
#: zone a few dozen pixels wide is entered and crossed with a position inside it.
STEP_PIXELS = 24
#: Pause before each step: a mouse reports every 8-16 ms. x11vnc reads pointer events
#: as it polls (``-pointer_mode 2``) and merges those that queue up, which is harmless
#: (the last one wins) as long as the steps are not all merged into one.
STEP_SECONDS = 0.016
#: Pause once past the threshold: the toolkit starts its drag session here (Chromium
#: asks the page for ``dragstart`` and then grabs the pointer for XDND).
DRAG_START_SECONDS = 0.08
#: Over the last point, the pointer steps 1 pixel off it and back this many times,
#: HOVER_SECONDS apart. An XDND source drops only if the target's answer to its last
#: position accepted the drop, and sends a position only when the pointer moves (or
#: every 350 ms, Chromium): Chromium answers a position with what the page said to the
#: previous one (its ``dragover`` is asynchronous), so the first answer over the target
#: is "no" and only a later position gets a "yes". A loaded machine, or a browser's
#: first drag, makes the page take longer (measured: 60-300 ms), hence several.
HOVER_STEPS = 4
HOVER_SECONDS = 0.06
#: Pause on the last point before the release, for the answer to the last position.
DWELL_SECONDS = 0.06
#: Most paced ticks for the whole path; a longer path sends several points per tick.
MAX_TICKS = 128


@dataclass(frozen=True, slots=True)
class Tick:
    """Wait ``pause`` seconds, then move the pointer (button held) through ``points`` in order."""

    pause: float
    points: tuple[Point, ...]


@dataclass(frozen=True, slots=True)
class DragMotion:
    """What a driver does between the press at ``path[0]`` and the release at ``path[-1]``."""

    ticks: tuple[Tick, ...]
    #: Seconds between the last tick and the release.
    dwell: float

    @property
    def seconds(self) -> float:
        """The pauses from the press to the release (what the drag takes, less delivery)."""
        return sum(t.pause for t in self.ticks) + self.dwell

    @property
    def points(self) -> tuple[Point, ...]:
        """Every point the pointer moves to, in order."""
        return tuple(p for t in self.ticks for p in t.points)


def _along(a: Point, b: Point, fraction: float) -> Point:
    return round(a[0] + (b[0] - a[0]) * fraction), round(a[1] + (b[1] - a[1]) * fraction)


def _steps(path: tuple[Point, ...]) -> tuple[list[Point], list[Point]]:
    """The path as small steps: (those up to the threshold, those after it)."""
    start = path[0]
    near: list[Point] = []
    far: list[Point] = []
    passed = False
    last = start
    for a, b in itertools.pairwise(path):
        length = math.dist(a, b)
        if length == 0:
            continue
        done = 0.0
        while not passed and done < length:
            done = min(length, done + THRESHOLD_STEP_PIXELS)
            point = b if done >= length else _along(a, b, done / length)
            if point != last:
                near.append(point)
                last = point
            passed = math.dist(point, start) >= THRESHOLD_PIXELS
        if done >= length:
            continue
        count = math.ceil((length - done) / STEP_PIXELS)
        for index in range(1, count + 1):
            point = b if index == count else _along(a, b, (done + (length - done) * index / count) / length)
            if point != last:
                far.append(point)
                last = point
    return near, far


def _chunks(points: list[Point], most: int) -> list[tuple[Point, ...]]:
    """``points`` in at most ``most`` consecutive groups, as even as can be."""
    if not points:
        return []
    per = -(-len(points) // most)
    return [tuple(points[i:i + per]) for i in range(0, len(points), per)]


def _wiggle(end: Point, previous: Point, screen: tuple[int, int]) -> Point | None:
    """A point 1 pixel off the last one, back the way the pointer came if the screen allows."""
    dx, dy = previous[0] - end[0], previous[1] - end[1]
    horizontal = abs(dx) >= abs(dy)
    toward = (1 if (dx if horizontal else dy) > 0 else -1)
    width, height = screen
    for sign in (toward, -toward):
        off = (end[0] + sign, end[1]) if horizontal else (end[0], end[1] + sign)
        if 0 <= off[0] < width and 0 <= off[1] < height:
            return off
    return None


def drag_motion(path: tuple[Point, ...], screen: tuple[int, int]) -> DragMotion:
    """The paced motion for a drag along ``path`` (already bounds-checked against ``screen``)."""
    near, far = _steps(path)
    # The threshold steps keep their small pace; the rest shares what is left of the budget.
    near_ticks = _chunks(near, MAX_TICKS // 4)
    far_ticks = _chunks(far, MAX_TICKS - len(near_ticks))
    # (The first step of any motion is a threshold step: ``far`` is empty when ``near`` is.)
    ticks = [Tick(BUTTON_HOLD_SECONDS if i == 0 else STEP_SECONDS, points) for i, points in enumerate(near_ticks)]
    ticks += [Tick(DRAG_START_SECONDS if i == 0 else STEP_SECONDS, points) for i, points in enumerate(far_ticks)]
    moved = near + far
    if moved:  # it ends on the path's end
        off = _wiggle(path[-1], moved[-2] if len(moved) > 1 else path[0], screen)
        if off is not None:
            for _ in range(HOVER_STEPS):
                ticks += [Tick(HOVER_SECONDS, (off,)), Tick(STEP_SECONDS, (path[-1],))]
    return DragMotion(tuple(ticks), DWELL_SECONDS)
