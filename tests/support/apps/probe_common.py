"""What the GTK and Qt probes share: the file protocol of ``reporting.py`` and the key vocabulary.

Imported by ``gtk_probe.py`` and ``qt_probe.py``, which run under the system's
Python (``SYSTEM_PYTHON``), so it uses the standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

__all__ = ("LatestSelection", "Probe", "dom_key", "mods")

#: X keysyms (GDK keyvals are X keysyms; Qt's xcb platform gives them as nativeVirtualKey)
#: whose DOM ``KeyboardEvent.key`` is not the character they type.
_NAMED_KEYSYMS: dict[int, str] = {
    0xFF0D: "Enter",  # Return
    0xFF8D: "Enter",  # KP_Enter
    0xFF09: "Tab",
    0xFE20: "Tab",  # ISO_Left_Tab: what Shift+Tab produces
    0xFF1B: "Escape",
    0xFF08: "Backspace",
    0xFFFF: "Delete",
    0xFF63: "Insert",
    0xFF50: "Home",
    0xFF57: "End",
    0xFF55: "PageUp",  # Prior
    0xFF56: "PageDown",  # Next
    0xFF51: "ArrowLeft",
    0xFF52: "ArrowUp",
    0xFF53: "ArrowRight",
    0xFF54: "ArrowDown",
    0xFF67: "ContextMenu",  # Menu
    0xFF13: "Pause",
    0xFF61: "PrintScreen",  # Print
    0xFF14: "ScrollLock",
    0xFF7F: "NumLock",
    0xFFE5: "CapsLock",
    0xFFE1: "Shift", 0xFFE2: "Shift",
    0xFFE3: "Control", 0xFFE4: "Control",
    0xFFE9: "Alt", 0xFFEA: "Alt",
    0xFFE7: "Meta", 0xFFE8: "Meta",  # Meta_L/R
    0xFFEB: "Meta", 0xFFEC: "Meta",  # Super_L/R: the DOM calls the Windows key "Meta"
    0xFE03: "AltGraph",  # ISO_Level3_Shift
}
_F1 = 0xFFBE  # F1..F35 are consecutive keysyms


def dom_key(keysym: int, char: str = "") -> str:
    """The DOM key name of ``keysym``; ``char`` is the toolkit's own character for it, if any."""
    if keysym in _NAMED_KEYSYMS:
        return _NAMED_KEYSYMS[keysym]
    if _F1 <= keysym < _F1 + 35:
        return f"F{keysym - _F1 + 1}"
    if 0x20 <= keysym <= 0x7E or 0xA0 <= keysym <= 0xFF:  # Latin-1 keysyms are their code points
        return chr(keysym)
    if 0x01000000 <= keysym <= 0x0110FFFF:  # Unicode keysyms
        return chr(keysym - 0x01000000)
    if char and char.isprintable():
        return char
    return "Unidentified"


def mods(*, shift: bool, ctrl: bool, alt: bool, super_: bool) -> list[str]:
    """The normalised, sorted ``mods`` list."""
    held = {"shift": shift, "ctrl": ctrl, "alt": alt, "super": super_}
    return sorted(name for name, down in held.items() if down)


class LatestSelection:
    """The selected text of whichever widget last selected something.

    The state has one "selection" but a probe has two selectable widgets (the
    field, for Ctrl+A, and the text the drag test selects in): the tests ask about
    the one they just acted on. A widget whose selection merely went away does not
    take over: selecting in one widget deselects the other (it loses PRIMARY) in
    the same moment.
    """

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}
        self._latest = ""

    def __call__(self, **selections: str) -> str:
        for name, text in selections.items():
            if text and self._seen.get(name, "") != text:
                self._latest = name
            self._seen[name] = text
        return self._seen.get(self._latest, "")


class Probe:
    """The program's side of the file protocol: events out, state out, commands in.

    The toolkit calls ``tick`` every ~20 ms from its main loop: it carries out new
    commands, then rewrites the state if anything in it changed. Building the state
    from the widgets on every tick (instead of on each change signal) keeps the
    probes small and makes ``done`` never run ahead of what the state shows.
    """

    #: Geometry must hold this many ticks, with the window focused, before "ready".
    STABLE_TICKS = 5

    def __init__(self) -> None:
        self._events = open(os.environ["PROBE_EVENTS"], "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the probe
        self._state_path = os.environ["PROBE_STATE"]
        self._commands_path = os.environ["PROBE_COMMANDS"]
        self._commands_read = 0
        self._done = 0
        self._last: dict[str, Any] | None = None
        self._ready = False
        self._stable = 0
        self._geometry: Any = None

    def emit(self, event: dict[str, Any]) -> None:
        """Append one normalised event, flushed at once so the tests see it now."""
        self._events.write(json.dumps(event, ensure_ascii=False) + "\n")
        self._events.flush()

    def _new_commands(self) -> list[str]:
        try:
            with open(self._commands_path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return []
        complete = lines[:-1]  # the part after the last newline may still be being written
        new = complete[self._commands_read:]
        self._commands_read = len(complete)
        return [line.strip() for line in new if line.strip()]

    def _is_ready(self, focused: bool, geometry: Any) -> bool:
        # Once ready, stay ready: the tests read the geometry once, at start.
        if not self._ready:
            self._stable = self._stable + 1 if focused and geometry == self._geometry else 0
            self._geometry = geometry
            self._ready = self._stable >= self.STABLE_TICKS
        return self._ready

    def tick(self, state: Callable[[], dict[str, Any]], focused: Callable[[], bool],
             run: Callable[[str], None]) -> None:
        """Carry out new commands, then publish ``state()`` (with "ready" and "done") if it changed."""
        for command in self._new_commands():
            run(command)
            self._done += 1
        current = state()
        current["ready"] = self._is_ready(focused(), (current["pad"], current["field"], current.get("drag"),
                                                                   current.get("dnd")))
        current["done"] = self._done
        if current != self._last:
            tmp = self._state_path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(current, f, ensure_ascii=False)
            os.replace(tmp, self._state_path)
            self._last = current
