"""The VNC driver's keyboard: what it sends so that the *server* types the right thing.

Keys. RFB key events carry X keysyms, so the key table is :mod:`cud.drivers.keys`,
and text is sent as keysyms, Unicode ones (``0x01000000 | code point``) beyond
Latin-1. The *server* turns a keysym into a keycode and the Shift state, so:

- x11vnc (0.9.16) adds a keysym missing from the X keymap to an unused keycode
  (``-add_keysyms``, on by default) and keeps it there; with ``-xkb`` (chosen
  automatically when needed) it presses Shift/AltGr itself for symbols on other
  levels. Typed upper case, ``!@~`` and ü — ✓ 日本語 € arrive exactly.
- TigerVNC's Xvnc (1.12) likewise puts missing keysyms on free keycodes itself
  and fakes the modifiers a keysym's level needs, releasing a held Shift when the
  keysym is on level 0. A viewer therefore sends ``A``, not ``a``, while Shift is
  down; so does this driver for keys in a combo that holds Shift (``shift+a``
  sends Shift_L, A; ``shift+1`` sends Shift_L, exclam, as on a US layout;
  ``shift+Tab`` sends ISO_Left_Tab), or the server would release Shift first.
- Both have 18 usable spare keycodes on a default keymap (19 empty ones, but
  keycode 8 is no key) and do not free them, not even when the client reconnects
  (Xvnc logs "Failure adding new keysym" and drops the key; x11vnc drops it too,
  measured: the 19th character of a text was lost in Chromium, GTK and Qt):
  a server can be sent at most 18 distinct characters
  missing from its keymap, and the driver refuses an action that would go past
  that (counted per server for the life of the process).
- Both change the keymap for a missing keysym in the same moment as they press its
  new keycode, and Chromium, which re-reads the keymap asynchronously, then types
  nothing. So each such keysym is put on the server's keymap first without typing
  it, once per connection, and clients get a moment to re-read the keymap before
  the text (see ``VncKeyboard._prime``). Text then goes out in one batch: the servers
  never give a borrowed keycode another symbol, so nothing changes under it.
- Xvnc loses a borrowed keysym sent as the very first key event of a connection
  (its core keyboard switches to the VNC device on that event); the driver taps
  Shift first in that one case.
- x11vnc in -xkb mode also releases a held Shift for keys whose levels all carry
  the same keysym (F1-F12, BackSpace): ``shift+F5`` would reach the app as plain
  F5. No client-side keysym avoids that, so on a server without RFB Fence (x11vnc)
  such a combo is refused up front; Xvnc delivers Shift+F5.
"""

from __future__ import annotations

from cud.errors import ActionRejected

from . import actions as A
from .keys import KEYMAP_SETTLE_SECONDS, MODIFIER_KEYSYMS
from .vnc_client import Connection, Event

__all__ = ("VncKeyboard", "Batch", "BORROW_LIMIT", "KEYMAP_CHANGE_SECONDS", "SHIFT_L", "SHIFTS")

SHIFT_L = 0xFFE1
SHIFTS = frozenset({SHIFT_L, 0xFFE2})  # Shift_L, Shift_R
# What a viewer on a US layout sends for a key pressed with Shift held: the server
# produces exactly the keysym it is sent, releasing Shift for an unshifted one.
_US_SHIFTED = {ord(a): ord(b) for a, b in zip("1234567890-=[]\\;',./`", '!@#$%^&*()_+{}|:"<>?~', strict=True)}
_US_SHIFTED[0xFF09] = 0xFE20  # Tab -> ISO_Left_Tab
_CONTROL_L = 0xFFE3
#: Keys x11vnc (in -xkb mode, which it picks itself) sends without a held Shift: F1-F12, BackSpace.
_SHIFT_LOST = frozenset(range(0xFFBE, 0xFFBE + 12)) | {0xFF08}
#: Extra seconds to wait after a prime, per keysym the server added (see ``VncKeyboard._prime``).
KEYMAP_CHANGE_SECONDS = 0.05
#: Spare keycodes x11vnc and Xvnc have on their default keymaps for keysyms they lack.
#: Past this many distinct such keysyms they drop keys silently, and they never give
#: the keycodes back (not even when the client reconnects), so an action that would
#: go past it on a server is refused before anything is sent.
BORROW_LIMIT = 18
#: Keysyms that may have been put on a spare keycode, per server, for this process's life.
_BORROWED: dict[str, set[int]] = {}
#: Seconds to wait before sending a batch, and the batch (which ends with a fence).
Batch = tuple[float, list[Event]]


class VncKeyboard:
    """The key state one VNC driver keeps about its server: what it held, primed and borrowed."""

    def __init__(self, server: str) -> None:
        self.server = server
        #: Keysyms ever held down across events by this driver (combos, held keys).
        self.held_ever: set[int] = set()
        #: The connection that has carried a key event (see ``before``).
        self._used: Connection | None = None
        #: Keysyms that may need a spare keycode, already primed on the current connection.
        self._primed: set[int] = set()

    def connected(self) -> None:
        """A new connection: the server may be a new one with a fresh keymap."""
        self._primed = set()

    @property
    def releases(self) -> frozenset[int]:
        """Every keysym this driver could have left down: the modifiers and whatever it held."""
        return MODIFIER_KEYSYMS | frozenset(self.held_ever)

    def held(self, step: A.Plan, conn: Connection) -> tuple[int, ...]:
        """The keysyms to hold down for ``step``'s ``keys``, as a viewer would send them.

        Refuses a combo the server would deliver without its Shift (see the module's notes).
        """
        keys = getattr(step, "keys", ())
        shifted = any(k in SHIFTS for k in keys)
        lost = [k for k in keys if k in _SHIFT_LOST] if shifted and not conn.server_fences else []
        if lost:
            raise ActionRejected(
                f"VNC server {self.server} would deliver {getattr(step, 'names', keys)!r} without Shift: x11vnc "
                f"releases Shift for keys whose levels all carry one symbol (F1-F12, BackSpace)",
                server=self.server, keys=[f"{k:#x}" for k in lost])
        # While Shift is held a viewer sends the upper-case letter; the server would
        # release Shift to produce a lower-case one.
        held = tuple(_shifted(k) if shifted else k for k in keys)
        self.held_ever.update(held)
        return held

    def before(self, conn: Connection, step: A.Plan, batches: list[Batch]) -> list[Batch]:
        """Check the action's keys against the server's spare keycodes; the batches that must
        reach the server before the action's own (each fenced).

        May delay the action's first batch, for clients to re-read a primed keymap.
        """
        keys = [e[1] for _, batch in batches for e in batch if e[0] == "key"]
        borrowed = _BORROWED.setdefault(self.server, set())
        needed = borrowed | {k for k in keys if _may_be_borrowed(k)}
        if len(needed) > BORROW_LIMIT:
            raise ActionRejected(
                f"typing this would need {len(needed)} distinct characters missing from the keymap of "
                f"{self.server}; VNC servers hold at most {BORROW_LIMIT} and drop the rest",
                needed=len(needed), limit=BORROW_LIMIT, server=self.server,
            )
        borrowed |= needed
        before: list[Batch] = []
        if keys and conn is not self._used:
            if _may_be_borrowed(keys[0]):
                # Xvnc switches its core keyboard to the VNC device on that device's
                # first event and loses a keysym it had to borrow a keycode for in
                # that same event (seen: a first "ü" typed nothing). A lone Shift tap
                # makes the switch first.
                before.append((0.0, [("key", SHIFT_L, True), ("key", SHIFT_L, False)]))
            self._used = conn
        # Text only: a keypress combo's key is pressed as asked (a Control-held prime
        # of shift+Tab's ISO_Left_Tab would be ctrl+shift+Tab, the previous tab).
        prime = self._prime(conn, list(step.keysyms)) if isinstance(step, A.TypeText) else None
        if prime is not None:
            settle, events = prime
            before.append((0.0, events))
            batches[0] = (settle, batches[0][1])
        return before

    def _prime(self, conn: Connection, keysyms: list[int]) -> Batch | None:
        """(seconds to wait after it, a batch) that makes the server put ``keysyms`` on its spare
        keycodes without typing them.

        Both x11vnc and Xvnc change the keymap for a keysym they lack in the same
        moment as they press its new keycode. An app that re-reads the keymap
        asynchronously (Chromium) handles that press with the old keymap and types
        nothing (measured: a 10-character non-ASCII text lost some in 15 of 20 runs
        on x11vnc; every later use of the same keysym arrives, as the servers never
        give those keycodes another symbol; pacing the keys does not help). So each
        keysym is first sent in a way no app types, then clients get
        ``KEYMAP_SETTLE_SECONDS`` before the real keys:

        - x11vnc adds a keysym on a lone *release*, and the X server drops the
          release of a key that is not down, so nothing reaches any app;
        - Xvnc ignores a release it saw no press for, so it gets the press with
          Control held, which toolkits do not turn into text (GTK, Qt, Tk,
          Chromium) but a terminal may: xterm without ``modifyOtherKeys`` types
          Control+é as é (measured), so there each new character arrives twice.
          Nothing that reaches Xvnc over RFB adds a keysym without a press.

        Only text is primed, once per keysym and connection.
        """
        fresh = [k for k in dict.fromkeys(keysyms) if _may_be_borrowed(k) and k not in self._primed]
        if not fresh:
            return None
        self._primed.update(fresh)
        if conn.server_fences:  # TigerVNC's Xvnc
            events: list[Event] = [("key", _CONTROL_L, True)]
            events += [("key", k, down) for k in fresh for down in (True, False)]
            events.append(("key", _CONTROL_L, False))
            self.held_ever.add(_CONTROL_L)
        else:
            events = [("key", k, False) for k in fresh]
        # Both servers change the keymap once per new keysym, and every change makes
        # each client re-read it; a window manager also re-grabs its key bindings
        # (openbox: ~15 ms each on an idle machine), and until it has, its click-to-focus grab holds the
        # next click (seen: a press and release delivered together 0.3 s late, after
        # 18 new keysyms on x11vnc). So the wait grows with the changes.
        return (KEYMAP_SETTLE_SECONDS + KEYMAP_CHANGE_SECONDS * len(fresh), events)


def _may_be_borrowed(keysym: int) -> bool:
    """Whether a server may have to map ``keysym`` onto a spare keycode to type it.

    ASCII and the keys of every keyboard are always in the keymap (and so is
    ISO_Left_Tab, Shift+Tab's own symbol, which this driver sends for it); anything
    else (Latin-1 letters included, on a US layout) may not be.
    """
    return (0x7E < keysym < 0xFF00 and keysym != _US_SHIFTED[0xFF09]) or keysym >= 0x01000000


def _shifted(keysym: int) -> int:
    """The keysym a key gives with Shift: upper-case letters, US-layout symbols, ISO_Left_Tab."""
    if keysym in _US_SHIFTED:
        return _US_SHIFTED[keysym]
    code = keysym & 0xFFFFFF if keysym >> 24 == 1 else keysym if keysym <= 0xFF else None
    if code is None:
        return keysym
    upper = chr(code).upper()
    if len(upper) != 1 or upper == chr(code):
        return keysym
    value = ord(upper)
    return value if value <= 0xFF else 0x01000000 | value
