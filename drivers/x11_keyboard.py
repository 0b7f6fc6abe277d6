"""Keysym -> keycode for XTEST, including characters the keymap does not have.

A keysym found at level 0 or 1 of the core keymap is pressed with Shift as its
level needs. Any other keysym (ü, —, ✓, 日, €, F13 ...) is put on a *borrowed*
keycode for as long as it is needed, with the same symbol on both levels so the
Shift state cannot change it. Borrowed are keycodes with no symbols at all and
those carrying only vendor (XF86 media) keysyms, but for the browser and editing
command keys Chromium acts on by keycode (``_COMMAND_KEYSYMS``): ~100 on Xvfb's
default map.

Why the care: an X client turns a keycode into a keysym when it *processes* the
event, using the keymap it fetched after the last MappingNotify. Changing a
keycode that already-sent events still refer to can make the app read the new
symbol. So a borrowed keycode is only re-assigned after a *drain*: our requests
synced, then the driver waits for clients to catch up (the screen settles, and
at least a time proportional to the keys sent). That is only needed for a text
with more distinct missing symbols than borrowable keycodes. Assignments are kept
until the screen has settled after the action batch (see ``X11Driver.screenshot``),
and then restored.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from Xlib import XK, X
from Xlib.display import Display
from Xlib.ext import xtest

from cud.errors import DriverError

from .keys import KEYMAP_SETTLE_SECONDS

__all__ = ()

_SHIFT = XK.XK_Shift_L
_VENDOR_KEYSYMS = range(0x1008FF00, 0x10090000)
#: Vendor keys never lent out: Chromium acts on these *keycodes* (by their evdev code,
#: whatever symbol they carry now) as browser and editing commands, and types nothing.
#: Measured by borrowing every spare keycode of Xvfb's keymap for a character typed into
#: Chromium: Copy, Paste, Cut, Favorites, Back, Forward, HomePage (it navigated away),
#: Reload and Search failed; Stop and Refresh are their siblings.
_COMMAND_KEYSYMS = frozenset({
    0x1008FF57, 0x1008FF6D, 0x1008FF58,  # XF86Copy, XF86Paste, XF86Cut
    0x1008FF30, 0x1008FF26, 0x1008FF27,  # XF86Favorites, XF86Back, XF86Forward
    0x1008FF18, 0x1008FF73, 0x1008FF1B,  # XF86HomePage, XF86Reload, XF86Search
    0x1008FF28, 0x1008FF29,  # XF86Stop, XF86Refresh
})


class Keyboard:
    def __init__(self, dpy: Display, wait_for_clients: Callable[[int], None]) -> None:
        """``wait_for_clients(n)`` returns once clients have likely handled the last ``n`` key events."""
        self._dpy = dpy
        self._wait_for_clients = wait_for_clients
        self._sent = 0
        self._min = dpy.display.info.min_keycode
        self._count = dpy.display.info.max_keycode - self._min + 1
        # keysym -> spare keycode it is on now, least recently used first.
        self._assigned: OrderedDict[int, int] = OrderedDict()
        # A remapped keycode was pressed since the last drain: re-assigning one is unsafe.
        self._dirty = False
        #: Keycodes pressed through this object and not yet released, in order.
        self.held: list[int] = []
        #: When this keyboard last changed the keymap (time.monotonic()).
        self.changed_at = 0.0
        self.refresh()
        # keycode -> its own symbols, to put back; keycode 8 maps to no evdev key.
        self._original = {kc: syms for kc, syms in self._borrowable().items() if kc > 8}
        self._free = sorted(self._original, reverse=True)
        # Keycodes a killed run (ours or xdotool's) left a borrowed symbol on: empty them.
        left_behind: dict[int, tuple[int, ...]] = {kc: () for kc, syms in self._original.items() if not syms}
        if left_behind:
            self._change(left_behind)
            self._dpy.sync()
            self.refresh()

    def refresh(self) -> None:
        """Re-read the keymap (after a MappingNotify for the keyboard)."""
        self._map = [tuple(row) for row in self._dpy.get_keyboard_mapping(self._min, self._count)]
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

    def _borrowable(self) -> dict[int, tuple[int, ...]]:
        """Keycodes we may lend out, with the symbols to give back (empty for a left-behind one)."""
        out: dict[int, tuple[int, ...]] = {}
        for offset, syms in enumerate(self._map):
            present = {sym for sym in syms if sym != X.NoSymbol}
            if all(sym in _VENDOR_KEYSYMS for sym in present) and not present & _COMMAND_KEYSYMS:
                out[self._min + offset] = tuple(syms)
            elif len(present) == 1 and len(syms) > 1 and syms[0] == syms[1] and _borrowed_looking(syms[0]):
                out[self._min + offset] = ()
        return out

    def prepare(self, keysyms: tuple[int, ...]) -> None:
        """Make sure each keysym has a keycode, assigning borrowed ones in order of first use.

        At most ``capacity`` distinct keysyms may need one (see ``chunk_end``). All
        changes go out as one request: one MappingNotify, one keymap refetch per client.
        """
        missing = [sym for sym in dict.fromkeys(keysyms) if sym not in self._lookup]
        for sym in keysyms:
            if sym in self._assigned:
                self._assigned.move_to_end(sym)
        changes: dict[int, tuple[int, ...]] = {}
        for sym in missing:
            if not self._free:
                self._evict_one()
            keycode = self._free.pop()
            changes[keycode] = (sym, sym)
            self._assigned[sym] = keycode
            self._lookup[sym] = (keycode, 0)
        if changes:
            self._change(changes)
            self._dpy.sync()
            time.sleep(KEYMAP_SETTLE_SECONDS)  # let clients re-read the keymap first (see keys)

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
        self._sent += 1
        if down:
            self.held.append(keycode)
            if keycode in self._original:  # a borrowable keycode: its meaning may change
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
        if caps_lock and keycode not in self._original and _is_letter(keysym):
            shifted = not shifted
        return keycode, shifted

    def _evict_one(self) -> None:
        if self._dirty:
            self.drain()
        sym, keycode = self._assigned.popitem(last=False)
        del self._lookup[sym]
        self._free.append(keycode)

    def drain(self) -> None:
        self._dpy.sync()
        self._wait_for_clients(self._sent)
        self._sent = 0
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
            self._free.append(keycode)
        self._change({keycode: self._original[keycode] for keycode in self._assigned.values()})
        self._assigned.clear()
        self._sent = 0
        self._dirty = False
        self._dpy.sync()

    def _change(self, rows: dict[int, tuple[int, ...]]) -> None:
        """Set the symbols of some keycodes in one request over their whole range."""
        if not rows:
            return
        self.changed_at = time.monotonic()
        first, last = min(rows), max(rows)
        for keycode, syms in rows.items():
            self._map[keycode - self._min] = (tuple(syms) + (X.NoSymbol,) * self._per)[: self._per]
        self._dpy.change_keyboard_mapping(first, [tuple(self._map[kc - self._min]) for kc in range(first, last + 1)])

def _borrowed_looking(keysym: int) -> bool:
    """A non-ASCII character, alone on a key on both levels: a borrowed keycode never given back.

    Real layouts pair a letter with its other case (udiaeresis, Udiaeresis) and a
    one-level key has nothing on level 2 (plusminus, NoSymbol); this module and
    xdotool put the same symbol on both.
    """
    return 0xA0 <= keysym <= 0xFF or 0x01000100 <= keysym <= 0x0110FFFF


def _is_letter(keysym: int) -> bool:
    return 0x41 <= keysym <= 0x5A or 0x61 <= keysym <= 0x7A or 0xC0 <= keysym <= 0xFE and keysym != 0xD7 and keysym != 0xF7
