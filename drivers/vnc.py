"""The VNC driver: the X11 driver's exact actions over RFB, through vncdotool's protocol.

Every action is validated completely by :func:`cud.drivers.actions.plan` against
the framebuffer size before anything is sent; a whole action then goes out as one
batch of RFB key and pointer events followed by a fence (see ``vnc_client``), so
a call returns once the server has read all of it. Connection, threads and
timeouts live in :mod:`cud.drivers.vnc_client`.

Bounds come from the framebuffer as of the last fence: every action and every
screenshot ends with one, and a DesktopSize change arrives in it, so the size an
action is checked against is the size of the screen the model last saw.

Keys. RFB key events carry X keysyms, so the key table is :mod:`cud.drivers.keys`,
and text is sent as keysyms, Unicode ones (``0x01000000 | code point``) beyond
Latin-1. The *server* turns a keysym into a keycode and the Shift state, so:

- x11vnc (0.9.16) adds a keysym missing from the X keymap to an unused keycode
  (``-add_keysyms``, on by default) and removes it later; with ``-xkb`` (chosen
  automatically when needed) it presses Shift/AltGr itself for symbols on other
  levels. Typed upper case, ``!@~`` and ü — ✓ 日本語 € arrive exactly.
- TigerVNC's Xvnc (1.12) likewise puts missing keysyms on free keycodes itself
  and fakes the modifiers a keysym's level needs, releasing a held Shift when the
  keysym is on level 0. A viewer therefore sends ``A``, not ``a``, while Shift is
  down; so does this driver for keys in a combo that holds Shift (``shift+a``
  sends Shift_L, A; ``shift+1`` sends Shift_L, exclam, as on a US layout;
  ``shift+Tab`` sends ISO_Left_Tab), or the server would release Shift first.
- Both have 19 spare keycodes on a default keymap and do not free them, not even
  when the client reconnects (Xvnc logs "Failure adding new keysym" and drops the
  key; x11vnc drops it too): a server can be sent at most ~19 distinct characters
  missing from its keymap, and the driver refuses an action that would go past
  that (counted per server for the life of the process). The driver sends each such character in its own batch
  with a fence and a 50 ms pause, because both servers also re-use those keycodes.
- Xvnc loses a borrowed keysym sent as the very first key event of a connection
  (its core keyboard switches to the VNC device on that event); the driver taps
  Shift first in that one case.
- x11vnc in -xkb mode also releases a held Shift for keys whose levels all carry
  the same keysym (F1-F12, BackSpace): ``shift+F5`` reaches the app as plain F5.
  No client-side keysym avoids that; Xvnc delivers Shift+F5.

RFB has 8 mouse buttons (a byte of mask bits); ``forward`` (X button 9) has no
bit and is rejected before anything is sent.
"""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from vncdotool.command import parse_server

from cud.errors import ActionRejected, ConfigError, DisplayUnavailable, DriverError

from . import actions as A
from .base import Driver
from .frames import patch, settle
from .keys import MODIFIER_KEYSYMS
from .png import PngEncoder, to_data_url
from .vnc_client import RAWMODE, Address, Connection, Event

if TYPE_CHECKING:
    from openai.lib.computer import Screenshot

__all__ = ("VNCDriver",)

_SHIFT_L = 0xFFE1
_SHIFTS = frozenset({_SHIFT_L, 0xFFE2})  # Shift_L, Shift_R
# What a viewer on a US layout sends for a key pressed with Shift held: the server
# produces exactly the keysym it is sent, releasing Shift for an unshifted one.
_US_SHIFTED = {ord(a): ord(b) for a, b in zip("1234567890-=[]\\;',./`", '!@#$%^&*()_+{}|:"<>?~')}
_US_SHIFTED[0xFF09] = 0xFE20  # Tab -> ISO_Left_Tab
_MAX_BUTTON = 8
#: Seconds to let X clients read a key event before the next keysym the server may
#: have to put on a borrowed keycode is sent (see ``_type_batches``).
DRAIN_SECONDS = 0.05
#: Spare keycodes x11vnc and Xvnc have on their default keymaps for keysyms they lack.
#: Past this many distinct such keysyms they drop keys silently, and they never give
#: the keycodes back (not even when the client reconnects), so an action that would
#: go past it on a server is refused before anything is sent.
BORROW_LIMIT = 19
#: Keysyms that may have been put on a spare keycode, per server, for this process's life.
_BORROWED: dict[str, set[int]] = {}


def parse_address(server: str) -> Address:
    """"HOST::PORT", "HOST:DISPLAY" (port 5900 + DISPLAY), "HOST", "[IPv6]::PORT" or a socket path."""
    if not isinstance(server, str) or not server:
        raise ConfigError(f"VNC server must be given as HOST::PORT, got {server!r}", server=repr(server))
    try:
        family, host, port = parse_server(server)
    except ValueError as exc:
        raise ConfigError(f"cannot parse VNC server {server!r} (expected HOST::PORT): {exc}", server=server) from None
    if family != socket.AF_UNIX and not 0 < port < 65536:
        raise ConfigError(f"VNC port {port} of {server!r} is out of range", server=server, port=port)
    return Address(family, host, port)


def _mask_bit(button: int) -> int:
    return 1 << (button - 1)


class VNCDriver(Driver):
    """Drive one VNC server. ``server`` is "HOST::PORT"; ``password`` is for VNC authentication."""

    def __init__(self, server: str = "127.0.0.1::5900", password: str | None = None, *,
                 wait_seconds: float = 1.0, settle_timeout: float = 1.0, settle_interval: float = 0.02,
                 timeout: float = 10.0) -> None:
        self.address = parse_address(server)
        self.server = str(self.address)
        self._password = password
        self.wait_seconds = wait_seconds
        self.settle_timeout = settle_timeout
        self.settle_interval = settle_interval
        self.timeout = timeout
        self._conn: Connection | None = None
        self._encoder = PngEncoder()
        self._last_frame: np.ndarray | None = None
        self._acted = False
        #: Last pointer position sent (RFB pointer events always carry one).
        self._pointer: tuple[int, int] | None = None
        #: Keysyms ever held down across events by this driver (combos, held keys).
        self._held_ever: set[int] = set()
        #: Keys/buttons an action pressed on a connection that died before it could
        #: release them: released first thing on the next connection.
        self._unreleased_keys: set[int] = set()
        self._unreleased_buttons = False
        #: The connection that has carried a key event (see ``_act``).
        self._keyboard_used: Connection | None = None

    def __repr__(self) -> str:
        return f"VNCDriver({self.server!r})"

    # -- connection --------------------------------------------------------------
    def _connection(self) -> Connection:
        if self._conn is not None and not self._conn.alive:
            self._conn = None
        if self._conn is None:
            self._conn = Connection(self.address, self._password, self.timeout)
            self._acted = True  # a new connection's first screenshot settles too
            if self._unreleased_keys or self._unreleased_buttons:
                self._send(self._conn, self._release_events(self._unreleased_keys, self._unreleased_buttons))
                self._unreleased_keys.clear()
                self._unreleased_buttons = False
        return self._conn

    def _send(self, conn: Connection, events: list[Event], *, frame: bool = False) -> Any:
        try:
            return conn.send(events, frame=frame)
        except DisplayUnavailable:
            # Whatever this batch pressed may have reached the server without its
            # release: release it on the next connection.
            for event in events:
                if event[0] == "key" and event[2]:
                    self._unreleased_keys.add(event[1])
                elif event[0] == "pointer" and event[3]:
                    self._unreleased_buttons = True
            self._conn = None
            raise

    @property
    def screen_size(self) -> tuple[int, int]:
        return self._connection().size

    # -- building event batches ---------------------------------------------------
    def _release_events(self, keys: set[int] | frozenset[int], buttons: bool) -> list[Event]:
        events: list[Event] = [("key", keysym, False) for keysym in sorted(keys)]
        if buttons and self._pointer is not None:
            events.append(("pointer", *self._pointer, 0))
        return events

    def _events(self, step: A.Plan) -> list[list[Event]]:
        """The whole action as batches of RFB events, every press followed by its release.

        Only typed text has more than one batch (see ``_type_batches``).
        """
        if isinstance(step, A.Click) and step.button > _MAX_BUTTON:
            raise ActionRejected(
                f"mouse button {step.button} cannot be sent over VNC (RFB has buttons 1-{_MAX_BUTTON})",
                button=step.button)
        keys = getattr(step, "keys", ())
        shifted = any(k in _SHIFTS for k in keys)
        # While Shift is held a viewer sends the upper-case letter; the server would
        # release Shift to produce a lower-case one.
        held = tuple(_shifted(k) if shifted else k for k in keys)
        events: list[Event] = [("key", k, True) for k in held]
        self._held_ever.update(held)

        def move(x: int, y: int, mask: int = 0) -> None:
            events.append(("pointer", x, y, mask))
            self._pointer = (x, y)

        def press(button: int, x: int, y: int) -> None:
            move(x, y, _mask_bit(button))
            move(x, y, 0)

        if isinstance(step, A.Click):
            move(step.x, step.y)
            for _ in range(step.count):
                press(step.button, step.x, step.y)
        elif isinstance(step, A.Move):
            move(step.x, step.y)
        elif isinstance(step, A.Drag):
            left = _mask_bit(A.BUTTONS["left"])
            move(*step.path[0])
            for x, y in step.path:
                move(x, y, left)
            move(*step.path[-1])
        elif isinstance(step, A.Scroll):
            move(step.x, step.y)
            for button, notches in step.wheel:
                for _ in range(notches):
                    press(button, step.x, step.y)
        elif isinstance(step, A.TypeText):
            return _type_batches(step.keysyms)
        events += [("key", k, False) for k in reversed(held)]
        return [events] if events else []

    def _act(self, action: Any) -> A.Plan:
        """Validate ``action`` and run it; nothing is sent unless the whole action is valid."""
        conn = self._connection()
        step = A.plan(action, conn.size)
        batches = self._events(step)
        keys = [e[1] for batch in batches for e in batch if e[0] == "key"]
        borrowed = _BORROWED.setdefault(self.server, set())
        needed = borrowed | {k for k in keys if _may_be_borrowed(k)}
        if len(needed) > BORROW_LIMIT:
            raise ActionRejected(
                f"typing this would need {len(needed)} distinct characters missing from the keymap of "
                f"{self.server}; VNC servers hold at most {BORROW_LIMIT} and drop the rest",
                needed=len(needed), limit=BORROW_LIMIT, server=self.server,
            )
        borrowed |= needed
        if keys and conn is not self._keyboard_used:
            if _may_be_borrowed(keys[0]):
                # Xvnc switches its core keyboard to the VNC device on that device's
                # first event and loses a keysym it had to borrow a keycode for in
                # that same event (seen: a first "ü" typed nothing). A lone Shift tap
                # makes the switch first.
                batches.insert(0, [("key", _SHIFT_L, True), ("key", _SHIFT_L, False)])
            self._keyboard_used = conn
        for index, events in enumerate(batches):
            if index:
                time.sleep(DRAIN_SECONDS)
            self._acted = True
            self._send(conn, events)
        return step

    def _grab(self) -> np.ndarray:
        return self._send(self._connection(), [], frame=True)

    def screenshot(self) -> Screenshot:
        if self._acted:
            frame = settle(self._grab, np.array_equal, self.settle_timeout, self.settle_interval)
            self._acted = False
        else:
            frame = self._grab()
        self._last_frame = frame
        height, width = frame.shape[:2]
        png = self._encoder.encode(frame.reshape(-1), width, height, RAWMODE)
        return {"type": "computer_screenshot", "image_url": to_data_url(png)}

    # -- what the daemon needs besides ------------------------------------------
    def peek(self) -> Screenshot:
        frame = self._grab()
        height, width = frame.shape[:2]
        return {"type": "computer_screenshot", "image_url": to_data_url(self._encoder.encode(frame.reshape(-1), width, height, RAWMODE))}

    def release_all(self) -> None:
        """Release every modifier, every key this driver held, and the mouse buttons.

        RFB cannot ask what is held, so this sends a release for everything this
        driver could have left down. (Xvnc also releases a client's keys when it
        disconnects; x11vnc does not.)
        """
        conn = self._connection()
        self._send(conn, self._release_events(MODIFIER_KEYSYMS | self._held_ever, True))

    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        frame = self._last_frame if from_last_screenshot else self._grab()
        if frame is None:
            raise DriverError("no screenshot has been taken on this driver yet", server=self.server)
        height, width = frame.shape[:2]
        return patch(frame.reshape(-1), width, height, x, y, radius)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.alive:
            try:
                conn.send(self._release_events(MODIFIER_KEYSYMS | self._held_ever, True))
            except DriverError:
                pass
        conn.close()


def _may_be_borrowed(keysym: int) -> bool:
    """Whether a server may have to map ``keysym`` onto a spare keycode to type it.

    ASCII and the keys of every keyboard are always in the keymap; anything else
    (Latin-1 letters included, on a US layout) may not be.
    """
    return 0x7E < keysym < 0xFF00 or keysym >= 0x01000000


def _type_batches(keysyms: tuple[int, ...]) -> list[list[Event]]:
    """Text as batches of press/release pairs, a new batch before each keysym that may be borrowed.

    Both x11vnc and Xvnc put a keysym missing from the keymap on a spare keycode
    and reuse those keycodes for later keysyms; an X client that reads an event
    after its keycode was given another symbol types the wrong character (seen:
    Xvnc typed "—" for "ü", x11vnc dropped characters). Each batch ends with a
    fence, so the server has delivered the event, and a short pause lets clients
    read it before the next keysym can take its keycode. ASCII text needs none.
    """
    batches: list[list[Event]] = []
    current: list[Event] = []
    previous = None
    for keysym in keysyms:
        if current and keysym != previous and _may_be_borrowed(keysym):
            batches.append(current)
            current = []
        current += [("key", keysym, True), ("key", keysym, False)]
        previous = keysym
    if current:
        batches.append(current)
    return batches


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
