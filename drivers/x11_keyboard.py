"""Keysym -> keycode for XTEST, including characters the keymap does not have.

A keysym found at level 0 or 1 of the core keymap is pressed with Shift as its
level needs. Any other keysym (ü, —, ✓, 日, €, F13 ...) is put on a *spare*
keycode (one with no symbols at all) for as long as it is needed, with the same
symbol on both levels so the Shift state cannot change it.

Why the care: an X client turns a keycode into a keysym when it *processes* the
event, using the keymap it fetched after the last MappingNotify. Changing a
keycode that already-sent events still refer to can make the app read the new
symbol. So a spare keycode is only ever re-assigned after a *drain* (our requests
synced, then a short pause for clients to catch up), and assignments are kept
until the screen has settled after the action batch (see ``X11Driver.screenshot``),
which is when they are restored.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from Xlib import X, XK
from Xlib.display import Display
from Xlib.ext import xtest

from cud.errors import DriverError

__all__ = ()

#: Seconds to let clients process events that name a spare keycode before it is
#: given another symbol. Only paid when a text needs more distinct missing symbols
#: than there are spare keycodes.
DRAIN_SECONDS = 0.05
_SHIFT = XK.XK_Shift_L


class Keyboard:
    def __init__(self, dpy: Display) -> None:
        self._dpy = dpy
        self._min = dpy.display.info.min_keycode
        self._count = dpy.display.info.max_keycode - self._min + 1
        # keysym -> spare keycode it is on now, least recently used first.
        self._assigned: OrderedDict[int, int] = OrderedDict()
        self._free: list[int] = []
        # A remapped keycode was pressed since the last drain: re-assigning one is unsafe.
        self._dirty = False
        #: Keycodes pressed through this object and not yet released, in order.
        self.held: list[int] = []
        self.refresh()
        self._free = [kc for kc in self._spares() if kc > 8]  # keycode 8 maps to no evdev key

    def refresh(self) -> None:
        """Re-read the keymap (after a MappingNotify for the keyboard)."""
        self._map = self._dpy.get_keyboard_mapping(self._min, self._count)
        self._per = len(self._map[0]) if self._map else 1
        found: dict[int, tuple[int, int]] = {}
        for offset, syms in enumerate(self._map):
            for level in (0, 1):
                if level < len(syms) and syms[level] and syms[level] not in found:
                    found[syms[level]] = (self._min + offset, level)
        # Alphabetic keys often list only the lower case; X implies the upper at level 1.
        for offset, syms in enumerate(self._map):
            lower = syms[0] if syms else 0
            if 0x61 <= lower <= 0x7A and (len(syms) < 2 or not syms[1]):
                found.setdefault(lower - 0x20, (self._min + offset, 1))
        found.update({sym: (kc, 0) for sym, kc in self._assigned.items()})
        self._lookup = found
        self._shift_code = found.get(_SHIFT, (0, 0))[0]

    def _spares(self) -> list[int]:
        return [self._min + i for i, syms in enumerate(self._map) if not any(syms)]

    def prepare(self, keysyms: tuple[int, ...]) -> None:
        """Make sure each keysym has a keycode, assigning spares in order of first use.

        At most ``capacity`` distinct keysyms may need a spare (see ``chunk_end``).
        """
        missing = [sym for sym in dict.fromkeys(keysyms) if sym not in self._lookup]
        for sym in keysyms:
            if sym in self._assigned:
                self._assigned.move_to_end(sym)
        for sym in missing:
            if not self._free:
                self._evict_one()
            keycode = self._free.pop()
            self._set(keycode, sym)
            self._assigned[sym] = keycode
            self._lookup[sym] = (keycode, 0)

    def chunk_end(self, keysyms: tuple[int, ...], start: int) -> int:
        """End of the longest run from ``start`` whose keysyms fit the spare keycodes at once."""
        capacity = len(self._free) + len(self._assigned)
        on_spares: set[int] = set()
        for end in range(start, len(keysyms)):
            sym = keysyms[end]
            if (sym in self._assigned or sym not in self._lookup) and sym not in on_spares:
                if len(on_spares) == capacity:
                    return end
                on_spares.add(sym)
        return len(keysyms)

    def press(self, keycode: int, *, down: bool) -> None:
        xtest.fake_input(self._dpy, X.KeyPress if down else X.KeyRelease, keycode)
        if down:
            self.held.append(keycode)
            if keycode in self._assigned.values():
                self._dirty = True
        elif keycode in self.held:
            self.held.remove(keycode)

    def press_keysym(self, keysym: int) -> None:
        """Press (and leave held) the key for ``keysym``, with Shift first if its level needs it.

        The keysym must have been through ``prepare`` (a combo prepares all its keys at once).
        """
        keycode, shifted = self._lookup_press(keysym, caps_lock=False)
        if shifted and self._shift_code:
            self.press(self._shift_code, down=True)
        self.press(keycode, down=True)

    def release_held(self) -> None:
        """Release what this keyboard pressed, last pressed first."""
        while self.held:
            self.press(self.held[-1], down=False)

    def type(self, keysyms: tuple[int, ...], *, caps_lock: bool) -> None:
        """Press and release each keysym in order, remapping spares chunk by chunk."""
        start = 0
        while start < len(keysyms):
            end = self.chunk_end(keysyms, start)
            if end == start:
                raise DriverError(f"no spare keycode left to type keysym {keysyms[start]:#x}", keysym=keysyms[start])
            self.prepare(keysyms[start:end])
            for sym in keysyms[start:end]:
                keycode, shifted = self._lookup_press(sym, caps_lock=caps_lock)
                if shifted:
                    self.press(self._shift_code, down=True)
                self.press(keycode, down=True)
                self.press(keycode, down=False)
                if shifted:
                    self.press(self._shift_code, down=False)
            self._dpy.flush()
            start = end

    def _lookup_press(self, keysym: int, *, caps_lock: bool) -> tuple[int, bool]:
        keycode, level = self._lookup[keysym]
        shifted = level == 1
        # Caps Lock inverts the case of letters only; both levels of a spare are equal.
        if caps_lock and keycode not in self._assigned.values() and _is_letter(keysym):
            shifted = not shifted
        return keycode, shifted

    def _evict_one(self) -> None:
        if self._dirty:
            self.drain()
        sym, keycode = self._assigned.popitem(last=False)
        del self._lookup[sym]
        self._set(keycode, X.NoSymbol)
        self._free.append(keycode)

    def drain(self) -> None:
        self._dpy.sync()
        time.sleep(DRAIN_SECONDS)
        self._dirty = False

    def restore(self, *, settled: bool) -> None:
        """Give every borrowed keycode back its empty mapping.

        ``settled`` says the caller already saw the screen stop changing after the
        last key, so clients have processed it; otherwise drain first.
        """
        if not self._assigned:
            return
        if self._dirty and not settled:
            self.drain()
        for sym, keycode in self._assigned.items():
            self._lookup.pop(sym, None)
            self._set(keycode, X.NoSymbol)
            self._free.append(keycode)
        self._assigned.clear()
        self._dirty = False
        self._dpy.sync()

    def _set(self, keycode: int, keysym: int) -> None:
        self._dpy.change_keyboard_mapping(keycode, [(keysym,) * 2 + (X.NoSymbol,) * (self._per - 2)])


def _is_letter(keysym: int) -> bool:
    return 0x41 <= keysym <= 0x5A or 0x61 <= keysym <= 0x7A or 0xC0 <= keysym <= 0xFE and keysym != 0xD7 and keysym != 0xF7
