"""A model that is not making progress: the same action on an unchanged screen, or screens in a cycle.

One :class:`StuckGuard` per task (``[guard]`` in the config, per task too; docs/stuck.md).
It keeps the fingerprints (:class:`cud.drivers.frames.Fingerprinter`, 8 bytes a tile) of the
last few screenshots the model was sent, nothing else of a frame, and decides per action in
time that does not grow with the task:

* **repeat**: the same action (same kind, a point within :data:`POINT_TOLERANCE` pixels, the
  same text, keys, scroll or button) chosen on a screen that did not change, ``repeat_limit``
  times in a row. "Did not change" is :func:`~cud.daemon.tasks.screen_binding.changed_outside_volatile`,
  the approval binding's own answer: the tiles that differ must be ones that change by
  themselves. Across steps a caret's or a blinking cursor's tile comes and goes: a tile is
  taken as changing by itself when what it shows now it showed on one of the
  :data:`CAME_BACK_SCREENS` screens before. A progress bar, a scrolled list, typed text or a new page show what the tile
  never showed, so they are changes.
* **cycle**: the model going round: the same few screens (2 to :data:`MAX_PERIOD`, not all
  alike) coming back in order for ``cycle_limit`` rounds, with the same action chosen on each.
  The screens are compared as above. The actions are part of the rule because screens alone
  cycle in legitimate work: opening File, closing it, opening Edit, closing it shows the bare
  window every other step.

Actions of one batch share one screenshot; only the first of them after a new screenshot
counts, so a batch is one choice of the model's.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from typing import Any

import numpy as np

from cud.daemon.tasks.screen_binding import changed_outside_volatile
from cud.record.model import describe_action

__all__ = ("CAME_BACK_SCREENS", "MAX_PERIOD", "POINT_TOLERANCE", "Stuck", "StuckGuard")

#: Two points this close (in pixels, on each axis) are the same point: a model re-aiming at one button.
POINT_TOLERANCE = 4
#: The longest cycle looked for, in screens.
MAX_PERIOD = 4
#: How many screens before the one compared are asked whether a tile shows what it showed before:
#: enough for a caret's both phases (it blinks about twice between steps), few enough that a
#: progress bar seldom replays its values within them.
CAME_BACK_SCREENS = 4
#: Screens kept besides the cycle's rounds, for what came back by itself.
_EXTRA_SCREENS = 8
_POINT_KEYS = ("x", "y")


@dataclasses.dataclass(frozen=True)
class Stuck:
    """What repeated: the ``stuck`` event's data, and the question put to a person."""

    rule: str  # "repeat" or "cycle"
    times: int  # actions in a row (repeat) or rounds (cycle)
    action: dict[str, Any]
    period: int | None = None  # screens in the cycle

    @property
    def message(self) -> str:
        what = describe_action(self.action, None, 120)
        if self.rule == "repeat":
            return f"the model chose {what} on an unchanged screen {self.times} times in a row"
        return (f"the same {self.period} screens came back {self.times} times in a cycle "
                f"(the model's next action: {what})")

    def as_event(self) -> dict[str, Any]:
        return {"rule": self.rule, "times": self.times, "period": self.period, "action": self.action,
                "message": self.message}


class StuckGuard:
    """Per task: ``repeat_limit`` and ``cycle_limit`` (0 turns a rule off)."""

    def __init__(self, repeat_limit: int, cycle_limit: int) -> None:
        self.repeat_limit = repeat_limit
        self.cycle_limit = cycle_limit
        #: The model's last choices: the screen it was shown (a fingerprint) and the action it chose there.
        self._choices: deque[tuple[np.ndarray, dict[str, Any]]] = deque(
            maxlen=MAX_PERIOD * max(cycle_limit, 1) + _EXTRA_SCREENS)
        self._cycle_runs = dict.fromkeys(range(2, MAX_PERIOD + 1), 0)
        self._screen: np.ndarray | None = None  # the last screenshot's, until an action counts it
        self._repeats = 0

    @property
    def active(self) -> bool:
        return bool(self.repeat_limit or self.cycle_limit)

    def see(self, fingerprint: np.ndarray) -> None:
        """A screenshot the model is about to be sent."""
        self._screen = fingerprint

    def act(self, action: dict[str, Any]) -> Stuck | None:
        """The model's next action; what repeated, if that makes it stuck."""
        if action.get("type") == "screenshot":
            return None
        screen, self._screen = self._screen, None
        if screen is None:  # the rest of a batch (one choice with its first action), or no screen seen yet
            if self._choices and not _same_action(self._choices[-1][1], action):
                self._repeats = 0
            return None
        choices = self._choices
        if choices and _same_action(choices[-1][1], action) and self._unchanged(len(choices) - 1, screen):
            self._repeats += 1
        else:
            self._repeats = 1
        for period in self._cycle_runs:
            back = len(choices) - period
            same = (back >= 0 and _same_action(choices[back][1], action) and self._unchanged(back, screen))
            self._cycle_runs[period] = self._cycle_runs[period] + 1 if same else 0
        choices.append((screen, action))
        stuck = None
        if self.repeat_limit and self._repeats >= self.repeat_limit:
            stuck = Stuck("repeat", self._repeats, action)
        elif self.cycle_limit:
            stuck = next((Stuck("cycle", self.cycle_limit, action, period)
                          for period, run in self._cycle_runs.items()
                          if run >= period * (self.cycle_limit - 1) and self._distinct(period)), None)
        if stuck is not None:  # a person let it go on, or it ended: either way counting starts again
            self._repeats = 0
            self._cycle_runs = dict.fromkeys(self._cycle_runs, 0)
        return stuck

    def _unchanged(self, index: int, now: np.ndarray) -> bool:
        """Whether ``now`` is the screen of choice ``index``, but for tiles that change by themselves:
        those that show what they showed on an earlier screen (a caret's blink coming back)."""
        before = self._choices[index][0]
        if before.shape != now.shape:
            return False
        came_back = np.zeros(len(now), bool)
        for screen, _action in itertools.islice(self._choices, max(0, index - CAME_BACK_SCREENS), index):
            if screen.shape == now.shape:
                came_back |= screen == now
        return not changed_outside_volatile(before, now, came_back & (before != now))

    def _distinct(self, period: int) -> bool:
        """The cycle's screens are not all one screen (that is the repeat rule's case), tile for tile:
        with what changes by itself left out, the two screens of a toggle would be one."""
        last = self._choices[-1][0]
        return any(not np.array_equal(self._choices[-i][0], last) for i in range(2, period + 1))


def _same_action(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same kind, same text, keys, scroll and button, and a point within POINT_TOLERANCE."""
    if a.get("type") != b.get("type"):
        return False
    for key in a.keys() | b.keys():
        if key in _POINT_KEYS:
            x, y = a.get(key), b.get(key)
            if not (isinstance(x, int) and isinstance(y, int) and abs(x - y) <= POINT_TOLERANCE) and x != y:
                return False
        elif key == "path":
            pa, pb = a.get("path") or [], b.get("path") or []
            if len(pa) != len(pb) or not all(_same_action({"type": "p", **p}, {"type": "p", **q})
                                             for p, q in zip(pa, pb) if isinstance(p, dict) and isinstance(q, dict)):
                return False
        elif a.get(key) != b.get(key):
            return False
    return True
