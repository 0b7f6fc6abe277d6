"""What every application of the conformance suite offers the tests.

An ``App`` runs a third-party program (or a small program on a third-party
toolkit) on a ``Desktop`` and reports what that program *itself* saw, in one
normalised vocabulary, so one set of tests (``tests/test_apps.py``) checks
every application × driver cell.

Events (dicts), in the order the application received them:

- ``{"type": "down" | "up", "button": N, "x": X, "y": Y, "mods": [...]}``: a mouse
  button, with X's numbering (1 left, 2 middle, 3 right, 8 back, 9 forward) and
  the *screen* point in native pixels;
- ``{"type": "dblclick", "button": 1, "x": X, "y": Y, "mods": [...]}``: the
  toolkit's own double-click recognition (DOM ``dblclick``, GDK
  ``2BUTTON_PRESS``, Qt ``MouseButtonDblClick``, …);
- ``{"type": "move", "x": X, "y": Y}``: pointer motion (the tests' fence);
- ``{"type": "wheel", "dx": -1 | 0 | 1, "dy": -1 | 0 | 1, "mods": [...]}``: a wheel
  event as the toolkit reports it, as signs: ``dy`` 1 is down, ``dx`` 1 is right;
- ``{"type": "key", "key": NAME, "mods": [...]}``: a key press, ``NAME`` in the
  DOM's ``KeyboardEvent.key`` vocabulary (``"a"``, ``"A"``, ``"Tab"``,
  ``"Escape"``, ``"F5"``, ``"ArrowLeft"``, ``"Enter"``, ``"Control"``…);
- ``{"type": "drop", "x": X, "y": Y}``: a drag-and-drop that the toolkit completed on
  the drop target (an HTML5 ``drop``, GTK's ``drag-data-received``, Qt's ``dropEvent``),
  at the screen point the toolkit says it landed.

``mods`` is a sorted list drawn from ``"alt"``, ``"ctrl"``, ``"shift"``, ``"super"``.

Regions are screen rectangles ``(x, y, width, height)`` in native pixels.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from ..desktop import Desktop
from ..recorder import wait_until

__all__ = ("App", "Event", "Rect", "MARKER_INSET")

Event = dict[str, Any]
Rect = tuple[int, int, int, int]
#: The fence point sits this far inside the pad's top-left corner.
MARKER_INSET = 3


class App(abc.ABC):
    """One application on one desktop. Started by ``start()``, stopped by pid by ``stop()``."""

    #: Short name used in test ids: "chromium", "gtk", "qt", "xterm".
    name: str
    #: What this application can show (tests for anything else are not collected for it):
    #: "buttons" (down/up of left, middle, right), "back_forward" (buttons 8/9), "dblclick",
    #: "drag_select", "dnd", "scroll" (all four directions), "keys", "type", "type_newline".
    capabilities: frozenset[str]

    def __init__(self, desktop: Desktop) -> None:
        self.desktop = desktop

    # -- life ------------------------------------------------------------------
    @abc.abstractmethod
    def start(self) -> None:
        """Launch, wait until the window is mapped, focused and reporting; fill in the regions."""

    @abc.abstractmethod
    def stop(self) -> None: ...

    # -- where things are (screen coordinates) -------------------------------------
    #: Clicks, wheel and motion land here and are reported with screen coordinates.
    pad: Rect
    #: The text input (clicking it focuses it). Multi-line where the toolkit has one,
    #: so that a typed newline (Return) shows up in ``value()`` as "\n".
    field: Rect

    # -- what the application saw -----------------------------------------------------
    @abc.abstractmethod
    def events(self, since: int = 0) -> list[Event]:
        """Every event since the ``since``-th, normalised as above."""

    def mark(self) -> int:
        return len(self.events())

    def wait_for(self, predicate: Callable[[Event], bool], since: int = 0, timeout: float = 10.0,
                 what: str = "an event") -> Event:
        return wait_until(lambda: next((e for e in self.events(since) if predicate(e)), None), timeout, what)

    #: Seconds the marker may take to arrive.
    fence_timeout = 10.0
    _fences = 0

    def fence(self, since: int) -> list[Event]:
        """Move the pointer to a marker point; every event between ``since`` and its arrival.

        Events reach the application in the order they were sent, so nothing that
        came before the marker can still be on its way. The marker is approached
        from a point beside it (a move into a window from outside may report only
        an enter), and alternates between two points: toolkits merge queued motion
        (Qt, Chromium, xterm) and drop a motion to where they last saw the pointer.
        """
        self._fences += 1
        x, y = self.pad[0] + MARKER_INSET + 2 * (self._fences % 2), self.pad[1] + MARKER_INSET
        self.desktop.driver.move({"type": "move", "x": x + 1, "y": y + 1})
        self.desktop.driver.move({"type": "move", "x": x, "y": y})

        def is_marker(e: Event) -> bool:
            return e["type"] == "move" and (e["x"], e["y"]) == (x, y)

        self.wait_for(is_marker, since, timeout=self.fence_timeout, what=f"the marker motion to ({x}, {y}) in {self.name}")
        events = self.events(since)
        return events[: next(i for i, e in enumerate(events) if is_marker(e))]

    @abc.abstractmethod
    def value(self) -> str:
        """The text input's content, as the application holds it."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Empty the text input, from the application's side (no input is sent)."""

    # -- drag ----------------------------------------------------------------------
    def selection_drag(self) -> tuple[tuple[int, int], tuple[int, int], str]:
        """(from, to, the text that a left drag from → to selects); for "drag_select"."""
        raise NotImplementedError(f"{self.name} has no drag_select")

    def dnd_regions(self) -> tuple[Rect, Rect]:
        """(where a left drag picks something up, where it can be dropped); for "dnd"."""
        raise NotImplementedError(f"{self.name} has no drag and drop")

    def selection(self) -> str:
        """The text selected in the application now; for "drag_select" and "dblclick" of a word."""
        raise NotImplementedError(f"{self.name} has no selection")

    def scroll_position(self) -> tuple[int, int]:
        """(left, top) of the scrollable area under the pad's centre, in the app's units."""
        raise NotImplementedError(f"{self.name} has no scroll area")

    def reset_scroll(self) -> None:
        """Scroll the area back to the middle, from the application's side."""
        raise NotImplementedError(f"{self.name} has no scroll area")
