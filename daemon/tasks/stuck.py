"""A model that is not making progress: the same actions on an unchanged screen, or screens in a cycle.

One :class:`StuckGuard` per task (``[guard]`` in the config, per task too; docs/stuck.md).
It keeps, of each screenshot the model was sent, its fingerprint (:class:`cud.drivers.frames.Fingerprinter`,
8 bytes a tile) and a hash of what the focused element held then
(:meth:`cud.daemon.targets.lookup.TargetResolver.focus_state`), nothing else, and decides per action in
time and memory that do not grow with the task:

* **repeat**: a *round* of 1 to :data:`MAX_PERIOD` actions (same kind, a point within
  :data:`POINT_TOLERANCE` pixels, the same text, keys, scroll or button) chosen again and again on a
  screen that did not change, ``repeat_limit`` rounds in a row: clicking one dead spot, or
  alternating two, a click and a wait, three actions in turn. "Did not change" is
  :func:`~cud.daemon.tasks.screen_binding.changed_outside_volatile`, the approval binding's own
  answer: the tiles that differ must be ones that change by themselves. Across steps a caret's or
  a blinking cursor's tile comes and goes: a tile is taken as changing by itself when what it shows
  now it showed on one of the :data:`CAME_BACK_SCREENS` screens before. A progress bar, a scrolled
  list, typed text or a new page show what the tile never showed, so they are changes. So is a new
  state of the focused element (its text, value, checked...), which pixels may not show: an entry
  that is full scrolls as it fills, showing the same pixels after each new character.
* **cycle**: the model going round: the same few screens (2 to :data:`MAX_PERIOD`, not all
  alike) coming back in order for ``cycle_limit`` rounds, with the same actions chosen on each.
  The screens are compared as above. The actions are part of the rule because screens alone
  cycle in legitimate work: opening File, closing it, opening Edit, closing it shows the bare
  window every other step.

Actions of one batch share one screenshot: a batch is one choice of the model's, decided on at its
first action (the rest have not come yet) and compared whole once they have.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from typing import Any

import numpy as np

from cud.daemon.tasks.screen_binding import changed_outside_volatile
from cud.phrases.actions import describe_action

__all__ = ("CAME_BACK_SCREENS", "MAX_PERIOD", "POINT_TOLERANCE", "Stuck", "StuckGuard")

#: Two points this close (in pixels, on each axis) are the same point: a model re-aiming at one button.
POINT_TOLERANCE = 4
#: The longest round of actions (repeat) and cycle of screens (cycle) looked for.
MAX_PERIOD = 4
#: How many screens before the one compared are asked whether a tile shows what it showed before:
#: enough for a caret's both phases (it blinks about twice between steps), few enough that a
#: progress bar seldom replays its values within them.
CAME_BACK_SCREENS = 4
#: Screens kept besides the cycle's rounds, for what came back by itself.
_EXTRA_SCREENS = 8
_POINT_KEYS = ("x", "y")
_PERIODS = range(1, MAX_PERIOD + 1)


@dataclasses.dataclass(frozen=True)
class Stuck:
    """What repeated: the ``stuck`` event's data, and the question put to a person."""

    rule: str  # "repeat" or "cycle"
    times: int  # rounds in a row (repeat) or rounds of the cycle (cycle)
    action: dict[str, Any]  # the one about to run, which would begin the next round (or end this one)
    period: int  # actions in a round (repeat) or screens in the cycle (cycle)
    actions: tuple[dict[str, Any], ...] = ()  # one round's, in order: the last is ``action``

    @property
    def message(self) -> str:
        what = describe_action(self.action, None, 120)
        if self.rule == "repeat" and self.period == 1:
            return f"the model chose {what} on an unchanged screen {self.times} times in a row"
        if self.rule == "repeat":
            round_ = ", then ".join(describe_action(a, None, 60) for a in self.actions)
            return (f"the model chose the same {self.period} actions ({round_}) on an unchanged screen "
                    f"{self.times} times in a row")
        return (f"the same {self.period} screens came back {self.times} times in a cycle "
                f"(the model's next action: {what})")

    @property
    def details(self) -> dict[str, Any]:
        """What the ``stuck`` error's details and the event hold besides the message."""
        return {"rule": self.rule, "times": self.times, "period": self.period, "action": self.action,
                "actions": list(self.actions)}

    def as_event(self) -> dict[str, Any]:
        return {**self.details, "message": self.message}


@dataclasses.dataclass(slots=True)
class _Choice:
    """One choice of the model's: the screen it was shown, what the focused element held, the batch it chose."""

    screen: np.ndarray
    held: int | None  # None: not known (no accessibility bus, nothing focused)
    actions: list[dict[str, Any]]


class StuckGuard:
    """Per task: ``repeat_limit`` and ``cycle_limit`` (0 turns a rule off)."""

    def __init__(self, repeat_limit: int, cycle_limit: int) -> None:
        self.repeat_limit = repeat_limit
        self.cycle_limit = cycle_limit
        #: The model's last choices (enough for the cycle's rounds and what came back by itself).
        self._choices: deque[_Choice] = deque(maxlen=MAX_PERIOD * max(cycle_limit, 1) + _EXTRA_SCREENS)
        #: Per period p: choices in a row whose batch is the one p choices before (the repeat rule's rounds).
        self._rounds = dict.fromkeys(_PERIODS, 0)
        #: Per period p >= 2: choices in a row whose batch and screen are those p choices before (the cycle rule).
        self._cycle_runs = dict.fromkeys(_PERIODS[1:], 0)
        #: Choices in a row on one unchanged screen (the first of them counts).
        self._still = 0
        self._screen: tuple[np.ndarray, int | None] | None = None  # the last screenshot's, until an action counts it

    @property
    def active(self) -> bool:
        return bool(self.repeat_limit or self.cycle_limit)

    def see(self, fingerprint: np.ndarray, held: int | None = None) -> None:
        """A screenshot the model is about to be sent, and what the focused element held then (None: unknown)."""
        self._screen = (fingerprint, held)

    def act(self, action: dict[str, Any]) -> Stuck | None:
        """The model's next action; what repeated, if that makes it stuck."""
        if action.get("type") == "screenshot":
            return None
        seen, self._screen = self._screen, None
        choices = self._choices
        if seen is None:  # the rest of a batch (one choice with its first action), or no screen seen yet
            if choices:
                choices[-1].actions.append(action)
            return None
        screen, held = seen
        self._close_batch()
        n = len(choices)
        self._still = self._still + 1 if n and self._unchanged(n - 1, screen, held) else 1
        for period in _PERIODS:
            back = n - period
            same = back >= 0 and _same_action(choices[back].actions[0], action)
            self._rounds[period] = self._rounds[period] + 1 if same else 0
            if period in self._cycle_runs:
                again = same and self._unchanged(back, screen, held)
                self._cycle_runs[period] = self._cycle_runs[period] + 1 if again else 0
        choices.append(_Choice(screen, held, [action]))
        stuck = self._repeat(action) or self._cycle(action)
        if stuck is not None:  # a person let it go on, or it ended: either way counting starts again
            self._rounds = dict.fromkeys(self._rounds, 0)
            self._cycle_runs = dict.fromkeys(self._cycle_runs, 0)
            self._still = 0
        return stuck

    def _repeat(self, action: dict[str, Any]) -> Stuck | None:
        """The shortest round chosen ``repeat_limit`` times in a row, all on one unchanged screen."""
        limit = self.repeat_limit
        if not limit:
            return None
        for period in _PERIODS:
            if self._rounds[period] >= period * (limit - 1) and self._still >= period * limit:
                return Stuck("repeat", limit, action, period, self._round(period))
        return None

    def _cycle(self, action: dict[str, Any]) -> Stuck | None:
        limit = self.cycle_limit
        if not limit:
            return None
        for period, run in self._cycle_runs.items():
            if run >= period * (limit - 1) and self._distinct(period):
                return Stuck("cycle", limit, action, period, self._round(period))
        return None

    def _round(self, period: int) -> tuple[dict[str, Any], ...]:
        return tuple(c.actions[0] for c in itertools.islice(self._choices, len(self._choices) - period, None))

    def _close_batch(self) -> None:
        """The last choice's batch is whole now: where it is not the batch ``period`` choices before
        (a first action alike, the rest not), that period's run ends."""
        choices = self._choices
        if not choices:
            return
        last = choices[-1].actions
        for period in _PERIODS:
            back = len(choices) - 1 - period
            if back < 0 or not self._rounds[period]:
                continue
            earlier = choices[back].actions
            if (len(last) > 1 or len(earlier) > 1) and not _same_batch(last, earlier):
                self._rounds[period] = 0
                if period in self._cycle_runs:
                    self._cycle_runs[period] = 0

    def _unchanged(self, index: int, now: np.ndarray, held: int | None) -> bool:
        """Whether ``now`` is the screen of choice ``index``, but for tiles that change by themselves:
        those that show what they showed on an earlier screen (a caret's blink coming back); and
        whether the focused element holds what it held then, or on one of those screens."""
        choice = self._choices[index]
        before = choice.screen
        if before.shape != now.shape:
            return False
        earlier = list(itertools.islice(self._choices, max(0, index - CAME_BACK_SCREENS), index))
        if held is not None and choice.held is not None and held != choice.held \
                and all(c.held != held for c in earlier):
            return False  # the focused element holds what it never held here: progress the pixels may not show
        came_back = np.zeros(len(now), bool)
        for c in earlier:
            if c.screen.shape == now.shape:
                came_back |= c.screen == now
        return not changed_outside_volatile(before, now, came_back & (before != now))

    def _distinct(self, period: int) -> bool:
        """The cycle's screens are not all one screen (that is the repeat rule's case), tile for tile and
        in what the focused element held: with what changes by itself left out, a toggle's two would be one."""
        last = self._choices[-1]
        return any(not np.array_equal(self._choices[-i].screen, last.screen) or self._choices[-i].held != last.held
                   for i in range(2, period + 1))


def _same_batch(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return len(a) == len(b) and all(_same_action(x, y) for x, y in zip(a, b, strict=True))


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
                                             for p, q in zip(pa, pb, strict=True) if isinstance(p, dict) and isinstance(q, dict)):
                return False
        elif a.get(key) != b.get(key):
            return False
    return True
