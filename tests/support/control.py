"""xdotool as a driver: the control of the conformance suite.

It has the SDK driver's methods, validated by the same ``actions.plan`` (so it
reads key names from the same table), and carries each action out with xdotool
on the test's own display. When an application cell fails for a cud driver but
passes here, the driver is at fault; when it fails here too, the harness is.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import time
from typing import Any

from Xlib import XK

from cud.drivers import actions as A
from cud.drivers.x11 import X11Driver

__all__ = ("Xdotool",)

#: xdotool's own pause between the clicks of a double-click, in ms (a person's ~100 ms).
DOUBLE_CLICK_DELAY_MS = 80
TYPE_DELAY_MS = 12
#: A drag as a careful xdotool user scripts one: the path in this many small moves,
#: DRAG_MOVE_SECONDS apart; then, at the end point, DRAG_HOVERS times 1 pixel off it and back,
#: each move DRAG_HOVER_SECONDS after the one before; then a pause before the release.
#:
#: Why the hover: an XDND source sends the target a position only when the pointer moves
#: (Chromium also repeats the last one every 350 ms), and drops only if the target's answer to
#: its last position accepted. Chromium answers a position with what the page said about the
#: one before (the page's ``dragover`` runs asynchronously), and Blink fires only ``dragenter``
#: at the position that enters an element, its ``dragover`` at the next one. A path whose last
#: move is the first inside the drop zone therefore reaches the release with the answer "no":
#: measured, CUD_TEST_DRAG_SEED=2863358408's 3-point drag entered the zone on its last move, got
#: one repeated position 350 ms later, and Chromium cancelled the drop at the release (500 ms);
#: 5 of 48 random drags failed so, each the same way, and none with the hover. More path moves
#: only make such paths rarer (40 moves still failed on fresh seeds).
DRAG_MOVES = 20
DRAG_MOVE_SECONDS = 0.02
DRAG_HOVERS = 3
DRAG_HOVER_SECONDS = 0.08
DRAG_DWELL_SECONDS = 0.2


#: X's own keysym names (what xdotool reads back with XStringToKeysym): "Control_L", "F5", "a", "space".
_NAMES: dict[int, str] = {}
for _attr, _value in vars(XK).items():
    if _attr.startswith("XK_"):
        _NAMES.setdefault(_value, _attr[3:])


def _key_name(keysym: int) -> str:
    if keysym in _NAMES:
        return _NAMES[keysym]
    if keysym >= 0x1000000:  # a Unicode keysym
        return f"U{keysym - 0x1000000:04X}"
    raise ValueError(f"xdotool has no name for keysym {keysym:#x}")


def _small_moves(path: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """``path`` after its first point as about DRAG_MOVES moves, spread by length, through every point."""
    lengths = [math.dist(a, b) for a, b in itertools.pairwise(path)]
    total = sum(lengths) or 1.0
    moves = []
    for (a, b), length in zip(itertools.pairwise(path), lengths, strict=True):
        count = max(1, round(DRAG_MOVES * length / total))
        moves += [(round(a[0] + (b[0] - a[0]) * i / count), round(a[1] + (b[1] - a[1]) * i / count))
                  for i in range(1, count + 1)]
    return moves


def _hover(end: tuple[int, int]) -> list[tuple[int, int]]:
    """The moves over ``end``: DRAG_HOVERS times 1 pixel left of it (right at the screen's left edge) and back."""
    x, y = end
    off = (x - 1, y) if x > 0 else (x + 1, y)
    return [off, end] * DRAG_HOVERS


class Xdotool:
    """Run actions with xdotool on ``display``; screenshots through an X11Driver (not under test here)."""

    kind = "xdotool"

    def __init__(self, display: str) -> None:
        self.display = display
        self.env = {**os.environ, "DISPLAY": display}
        self._size = X11Driver(display)  # for the screen size and release_all only

    def _run(self, *args: str) -> None:
        subprocess.run(["xdotool", *args], env=self.env, check=True, timeout=60,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

    @property
    def screen_size(self) -> tuple[int, int]:
        return self._size.screen_size

    def _keys_down(self, keys: tuple[int, ...]) -> list[str]:
        return [arg for k in keys for arg in ("keydown", _key_name(k))]

    def _keys_up(self, keys: tuple[int, ...]) -> list[str]:
        return [arg for k in reversed(keys) for arg in ("keyup", _key_name(k))]

    def _act(self, action: Any) -> None:
        step = A.plan(action, self.screen_size)
        keys = getattr(step, "keys", ())
        if isinstance(step, A.Click):
            self._run(*self._keys_down(keys), "mousemove", str(step.x), str(step.y), "click", "--repeat",
                      str(step.count), "--delay", str(DOUBLE_CLICK_DELAY_MS), str(step.button), *self._keys_up(keys))
        elif isinstance(step, A.Move):
            self._run("mousemove", str(step.x), str(step.y))
        elif isinstance(step, A.Drag):
            (x0, y0) = step.path[0]
            args = [*self._keys_down(keys), "mousemove", str(x0), str(y0), "mousedown", "1"]
            for x, y in _small_moves(step.path):
                args += ["sleep", str(DRAG_MOVE_SECONDS), "mousemove", str(x), str(y)]
            for x, y in _hover(step.path[-1]):
                args += ["sleep", str(DRAG_HOVER_SECONDS), "mousemove", str(x), str(y)]
            self._run(*args, "sleep", str(DRAG_DWELL_SECONDS), "mouseup", "1", *self._keys_up(keys))
        elif isinstance(step, A.Scroll):
            args = [*self._keys_down(keys), "mousemove", str(step.x), str(step.y)]
            for button, notches in step.wheel:
                args += ["click", "--repeat", str(notches), "--delay", "10", str(button)]
            self._run(*args, *self._keys_up(keys))
        elif isinstance(step, A.Keypress):
            self._run("key", "--clearmodifiers", "+".join(_key_name(k) for k in step.keys))
        elif isinstance(step, A.TypeText):
            # xdotool types "\n" as the Linefeed keysym, which GTK and Qt do not take for Return.
            for i, line in enumerate(step.text.split("\n")):
                if i:
                    self._run("key", "Return")
                if line:
                    self._run("type", "--delay", str(TYPE_DELAY_MS), "--", line)

    click = double_click = drag = keypress = move = scroll = type = _act

    def wait(self, action: Any) -> None:
        time.sleep(0.05)

    def screenshot(self) -> Any:
        return self._size.peek()

    def release_all(self) -> None:
        self._size.release_all()

    def close(self) -> None:
        self._size.close()
