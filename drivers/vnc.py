"""The VNC driver: the X11 driver's exact actions over RFB, through vncdotool's protocol.

Every action is validated completely by :func:`cud.drivers.actions.plan` against
the framebuffer size before anything is sent; a whole action then goes out as one
batch of RFB key and pointer events followed by a fence (see ``vnc_client``), so
a call returns once the server has read all of it (a double click, and keys the
server's keymap lacks, take two batches with a pause between: see below). Connection, threads and
timeouts live in :mod:`cud.drivers.vnc_client`.

Bounds come from the framebuffer as of the last fence: every action and every
screenshot ends with one, and a DesktopSize change arrives in it, so the size an
action is checked against is the size of the screen the model last saw.

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
  the text (see ``VNCDriver._prime``). Text then goes out in one batch: the servers
  never give a borrowed keycode another symbol, so nothing changes under it.
- Xvnc loses a borrowed keysym sent as the very first key event of a connection
  (its core keyboard switches to the VNC device on that event); the driver taps
  Shift first in that one case.
- x11vnc in -xkb mode also releases a held Shift for keys whose levels all carry
  the same keysym (F1-F12, BackSpace): ``shift+F5`` would reach the app as plain
  F5. No client-side keysym avoids that, so on a server without RFB Fence (x11vnc)
  such a combo is refused up front; Xvnc delivers Shift+F5.

Buttons. RFB has 8 mouse buttons (a byte of mask bits), but Xvnc delivers 1-7 and
x11vnc 1-5: ``back`` (X button 8) and ``forward`` (9) are rejected before anything
is sent. Horizontal wheel notches go out as RFB buttons 6/7 to servers that deliver
them (Xvnc); on others (x11vnc drops 6/7 without a trace) a horizontal scroll is
refused unless ``horizontal_scroll="shift"`` asks for Shift + vertical wheel (see
``HORIZONTAL_SCROLL_MODES``). A double click is two batches
``DOUBLE_CLICK_GAP_SECONDS`` apart, so the server stamps the presses apart.
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
from .drag_motion import drag_motion
from .frames import patch, settle
from .keys import KEYMAP_SETTLE_SECONDS, MODIFIER_KEYSYMS
from .png import PngEncoder, PngSettings
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
_CONTROL_L = 0xFFE3
#: The highest button VNC servers deliver. RFB's button mask has 8 bits, but Xvnc's
#: pointer has 7 buttons and x11vnc passes on 1-5 only: button 8 (``back``) reaches
#: neither (sent, it vanishes without a trace), and 9 (``forward``) has no bit at all.
_MAX_BUTTON = 7
#: Keys x11vnc (in -xkb mode, which it picks itself) sends without a held Shift: F1-F12, BackSpace.
_SHIFT_LOST = frozenset(range(0xFFBE, 0xFFBE + 12)) | {0xFF08}
#: Extra seconds to wait after a prime, per keysym the server added (see ``_prime``).
KEYMAP_CHANGE_SECONDS = 0.05
#: How ``scroll_x`` reaches the server (the ``horizontal_scroll`` option):
#: "buttons" sends RFB buttons 6/7, which Xvnc delivers as X buttons 6/7;
#: "shift" sends the vertical wheel (4/5) with Shift held, which GTK, Chromium and
#: Firefox read as horizontal scrolling, but Qt 5 as a *vertical page* scroll and a
#: terminal as a Shift+wheel event, so it is a choice for desktops of browsers and
#: GTK programs only; "auto" is "buttons" on a server that implements RFB Fence
#: (TigerVNC's Xvnc, TurboVNC) and refuses a horizontal scroll on any other (x11vnc
#: drops buttons 6/7 without a trace), naming the option.
HORIZONTAL_SCROLL_MODES = ("auto", "buttons", "shift")
#: Vertical wheel button that stands in for a horizontal one: left = up, right = down.
_TILT_AS_WHEEL = {A.WHEEL_LEFT: A.WHEEL_UP, A.WHEEL_RIGHT: A.WHEEL_DOWN}
#: Spare keycodes x11vnc and Xvnc have on their default keymaps for keysyms they lack.
#: Past this many distinct such keysyms they drop keys silently, and they never give
#: the keycodes back (not even when the client reconnects), so an action that would
#: go past it on a server is refused before anything is sent.
BORROW_LIMIT = 18
#: Keysyms that may have been put on a spare keycode, per server, for this process's life.
_BORROWED: dict[str, set[int]] = {}
#: Seconds to wait before sending a batch, and the batch (which ends with a fence).
Batch = tuple[float, list[Event]]


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
                 timeout: float = 10.0, horizontal_scroll: str = "auto", png: PngSettings | None = None) -> None:
        if horizontal_scroll not in HORIZONTAL_SCROLL_MODES:
            raise ConfigError(
                f"horizontal_scroll must be one of {', '.join(HORIZONTAL_SCROLL_MODES)}, got {horizontal_scroll!r}",
                horizontal_scroll=repr(horizontal_scroll))
        self.horizontal_scroll = horizontal_scroll
        self.address = parse_address(server)
        self.server = str(self.address)
        self._password = password
        self.wait_seconds = wait_seconds
        self.settle_timeout = settle_timeout
        self.settle_interval = settle_interval
        self._timeout = timeout
        self._conn: Connection | None = None
        self._encoder = PngEncoder(png)
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
        #: Keysyms that may need a spare keycode, already primed on the current connection.
        self._primed: set[int] = set()
        #: When the pointer may move again after the last release (see RELEASE_SETTLE_SECONDS).
        self._pointer_free_at = 0.0

    def __repr__(self) -> str:
        return f"VNCDriver({self.server!r})"

    @property
    def timeout(self) -> float:
        """Seconds any one call may take (``DriverTimeout`` past it); applies to the live connection too."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._timeout = value
        if self._conn is not None:
            self._conn.timeout = value

    # -- connection --------------------------------------------------------------
    def _connection(self) -> Connection:
        if self._conn is not None and not self._conn.alive:
            self._conn = None
        if self._conn is None:
            self._conn = Connection(self.address, self._password, self.timeout)
            self._acted = True  # a new connection's first screenshot settles too
            self._primed = set()  # the server may be a new one with a fresh keymap
            if self._unreleased_keys or self._unreleased_buttons:
                self._send(self._conn, self._release_events(self._unreleased_keys, self._unreleased_buttons))
                self._unreleased_keys.clear()
                self._unreleased_buttons = False
        return self._conn

    def _send(self, conn: Connection, events: list[Event], *, frame: bool = False, fence: bool = True) -> Any:
        try:
            return conn.send(events, frame=frame) if fence else conn.post(events)
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

    def _tilt(self, conn: Connection) -> str:
        """How this connection's server gets horizontal wheel notches (see ``HORIZONTAL_SCROLL_MODES``)."""
        if self.horizontal_scroll != "auto":
            return self.horizontal_scroll
        return "buttons" if conn.server_fences else "refuse"

    def _events(self, step: A.Plan, conn: Connection) -> list[Batch]:
        """The whole action as batches of RFB events, every press followed by its release.

        Each batch is (seconds to pause before sending it, its events); each ends
        with a fence, so a pause starts once the server has read what came before.
        A click holds its button for ``BUTTON_HOLD_SECONDS`` and a double click waits
        ``DOUBLE_CLICK_GAP_SECONDS`` between its clicks; a drag moves over time.
        """
        if isinstance(step, A.Click) and step.button > _MAX_BUTTON:
            name = next(n for n, b in A.BUTTONS.items() if b == step.button)
            raise ActionRejected(
                f"mouse button {step.button} ({name}) cannot be sent to VNC server {self.server}: "
                f"VNC servers deliver buttons 1-{_MAX_BUTTON} at most (x11vnc 1-5, Xvnc 1-7)",
                button=step.button, server=self.server)
        keys = getattr(step, "keys", ())
        shifted = any(k in _SHIFTS for k in keys)
        lost = [k for k in keys if k in _SHIFT_LOST] if shifted and not conn.server_fences else []
        if lost:
            raise ActionRejected(
                f"VNC server {self.server} would deliver {getattr(step, 'names', keys)!r} without Shift: x11vnc "
                f"releases Shift for keys whose levels all carry one symbol (F1-F12, BackSpace)",
                server=self.server, keys=[f"{k:#x}" for k in lost])
        # While Shift is held a viewer sends the upper-case letter; the server would
        # release Shift to produce a lower-case one.
        held = tuple(_shifted(k) if shifted else k for k in keys)
        events: list[Event] = [("key", k, True) for k in held]
        batches: list[Batch] = [(0.0, events)]
        self._held_ever.update(held)

        def move(x: int, y: int, mask: int = 0) -> None:
            events.append(("pointer", x, y, mask))
            self._pointer = (x, y)

        def press(button: int, x: int, y: int) -> None:
            move(x, y, _mask_bit(button))
            move(x, y, 0)

        def later(pause: float) -> None:
            nonlocal events
            events = []
            batches.append((pause, events))

        if isinstance(step, A.Click):
            move(step.x, step.y)
            for index in range(step.count):
                if index:
                    # The server stamps events as it reads them: the next press needs
                    # a batch of its own, sent a moment after the previous one's fence.
                    later(A.DOUBLE_CLICK_GAP_SECONDS)
                move(step.x, step.y, _mask_bit(step.button))
                later(A.BUTTON_HOLD_SECONDS)
                move(step.x, step.y, 0)
        elif isinstance(step, A.Move):
            move(step.x, step.y)
        elif isinstance(step, A.Drag):
            left = _mask_bit(A.BUTTONS["left"])
            move(*step.path[0])
            move(*step.path[0], left)
            # A batch per tick, paced as the X11 driver paces them (see drag_motion).
            motion = drag_motion(step.path, conn.size)
            for tick in motion.ticks:
                later(tick.pause)
                for x, y in tick.points:
                    move(x, y, left)
            later(motion.dwell)
            move(*step.path[-1])
        elif isinstance(step, A.Scroll):
            move(step.x, step.y)
            tilt = self._tilt(conn)
            if tilt == "refuse" and any(button in _TILT_AS_WHEEL for button, _ in step.wheel):
                raise ActionRejected(
                    f"VNC server {self.server} drops horizontal wheel buttons (6/7), so scroll_x cannot be "
                    "delivered; vnc_horizontal_scroll = \"shift\" sends Shift + vertical wheel instead "
                    "(horizontal in Chromium, Firefox and GTK, not in Qt or terminals)",
                    server=self.server)
            for button, notches in step.wheel:
                shift = tilt == "shift" and button in _TILT_AS_WHEEL and not _SHIFTS & set(held)
                if tilt == "shift":
                    button = _TILT_AS_WHEEL.get(button, button)
                if shift:  # (an action that holds Shift itself keeps it held throughout)
                    events.append(("key", _SHIFT_L, True))
                    self._held_ever.add(_SHIFT_L)
                for _ in range(notches):
                    press(button, step.x, step.y)
                if shift:
                    events.append(("key", _SHIFT_L, False))
        elif isinstance(step, A.TypeText):
            events += [("key", k, down) for k in step.keysyms for down in (True, False)]
        events += [("key", k, False) for k in reversed(held)]
        return [batch for batch in batches if batch[1]]

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
            self._held_ever.add(_CONTROL_L)
        else:
            events = [("key", k, False) for k in fresh]
        # Both servers change the keymap once per new keysym, and every change makes
        # each client re-read it; a window manager also re-grabs its key bindings
        # (openbox: ~15 ms each on an idle machine), and until it has, its click-to-focus grab holds the
        # next click (seen: a press and release delivered together 0.3 s late, after
        # 18 new keysyms on x11vnc). So the wait grows with the changes.
        return (KEYMAP_SETTLE_SECONDS + KEYMAP_CHANGE_SECONDS * len(fresh), events)

    def _act(self, action: Any) -> A.Plan:
        """Validate ``action`` and run it; nothing is sent unless the whole action is valid."""
        conn = self._connection()
        step = A.plan(action, conn.size)
        batches = self._events(step, conn)
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
        # Text only: a keypress combo's key is pressed as asked (a Control-held prime
        # of shift+Tab's ISO_Left_Tab would be ctrl+shift+Tab, the previous tab).
        # Batches that must have reached the server before the action starts, each fenced.
        before: list[Batch] = []
        first_key = next((e[1] for _, batch in batches for e in batch if e[0] == "key"), None)
        if first_key is not None and conn is not self._keyboard_used:
            if _may_be_borrowed(first_key):
                # Xvnc switches its core keyboard to the VNC device on that device's
                # first event and loses a keysym it had to borrow a keycode for in
                # that same event (seen: a first "ü" typed nothing). A lone Shift tap
                # makes the switch first.
                before.append((0.0, [("key", _SHIFT_L, True), ("key", _SHIFT_L, False)]))
            self._keyboard_used = conn
        prime = self._prime(conn, list(step.keysyms)) if isinstance(step, A.TypeText) else None
        if prime is not None:
            settle, events = prime
            before.append((0.0, events))
            batches[0] = (settle, batches[0][1])
        if (wait := self._pointer_free_at - time.monotonic()) > 0 and any(
                e[0] == "pointer" for _, events in batches for e in events):
            time.sleep(wait)
        for pause, events in before:
            time.sleep(pause)
            self._acted = True
            self._send(conn, events)
        # The action's own batches are paced but fenced only at the end: were the server
        # to stop half-way, a press and its release are both in its socket, never one alone.
        for index, (pause, events) in enumerate(batches):
            time.sleep(pause)
            self._acted = True
            self._send(conn, events, fence=index == len(batches) - 1)
        if isinstance(step, (A.Click, A.Drag)):
            self._pointer_free_at = time.monotonic() + A.RELEASE_SETTLE_SECONDS
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
        url = self._encoder.data_url(frame.reshape(-1), width, height, RAWMODE, frozen=True)  # a copy of the fb
        return {"type": "computer_screenshot", "image_url": url}

    # -- what the daemon needs besides ------------------------------------------
    def peek(self) -> Screenshot:
        frame = self._grab()
        height, width = frame.shape[:2]
        url = self._encoder.data_url(frame.reshape(-1), width, height, RAWMODE, frozen=True)  # a copy of the fb
        return {"type": "computer_screenshot", "image_url": url}

    def probe(self) -> tuple[int, int]:
        conn = self._connection()
        self._send(conn, [])  # a fence: the server has read up to here
        return conn.size

    def rest(self) -> None:
        self._last_frame = None
        self._encoder.forget()

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
