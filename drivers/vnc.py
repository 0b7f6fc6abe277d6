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

Keys. RFB key events carry X keysyms and the *server* turns them into keycodes and
Shift states: what that means for what is sent is :mod:`cud.drivers.vnc_keyboard`.

Buttons. RFB has 8 mouse buttons (a byte of mask bits), but Xvnc delivers 1-7 and
x11vnc 1-5: ``back`` (X button 8) and ``forward`` (9) are rejected before anything
is sent. Horizontal wheel notches go out as RFB buttons 6/7 to servers that deliver
them (Xvnc); on others (x11vnc drops 6/7 without a trace) a horizontal scroll is
refused unless ``horizontal_scroll="shift"`` asks for Shift + vertical wheel (see
``HORIZONTAL_SCROLL_MODES``). A double click is two batches
``DOUBLE_CLICK_GAP_SECONDS`` apart, so the server stamps the presses apart. A drag
is a batch per tick of :mod:`cud.drivers.drag_motion`, the X11 driver's schedule.
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
from .frames import ScreenPrints, patch, settle
from .png import PngEncoder, PngSettings
from .vnc_client import RAWMODE, Address, Connection, Event
from .vnc_keyboard import SHIFT_L, SHIFTS, Batch, VncKeyboard

if TYPE_CHECKING:
    from openai.lib.computer import Screenshot

__all__ = ("VNCDriver",)

#: The highest button VNC servers deliver. RFB's button mask has 8 bits, but Xvnc's
#: pointer has 7 buttons and x11vnc passes on 1-5 only: button 8 (``back``) reaches
#: neither (sent, it vanishes without a trace), and 9 (``forward``) has no bit at all.
_MAX_BUTTON = 7
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
        self._prints = ScreenPrints()
        self._acted = False
        #: Last pointer position sent (RFB pointer events always carry one).
        self._pointer: tuple[int, int] | None = None
        #: Keys/buttons an action pressed on a connection that died before it could
        #: release them: released first thing on the next connection.
        self._unreleased_keys: set[int] = set()
        self._unreleased_buttons = False
        self._keyboard = VncKeyboard(self.server)
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
            self._keyboard.connected()
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
        held = self._keyboard.held(step, conn)
        events: list[Event] = [("key", k, True) for k in held]
        batches: list[Batch] = [(0.0, events)]

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
                shift = tilt == "shift" and button in _TILT_AS_WHEEL and not SHIFTS & set(held)
                if tilt == "shift":
                    button = _TILT_AS_WHEEL.get(button, button)
                if shift:  # (an action that holds Shift itself keeps it held throughout)
                    events.append(("key", SHIFT_L, True))
                    self._keyboard.held_ever.add(SHIFT_L)
                for _ in range(notches):
                    press(button, step.x, step.y)
                if shift:
                    events.append(("key", SHIFT_L, False))
        elif isinstance(step, A.TypeText):
            events += [("key", k, down) for k in step.keysyms for down in (True, False)]
        events += [("key", k, False) for k in reversed(held)]
        return [batch for batch in batches if batch[1]]

    def _act(self, action: Any) -> A.Plan:
        """Validate ``action`` and run it; nothing is sent unless the whole action is valid."""
        conn = self._connection()
        step = A.plan(action, conn.size)
        batches = self._events(step, conn)
        # Batches that must have reached the server before the action starts, each fenced.
        before = self._keyboard.before(conn, step, batches)
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
        frame: np.ndarray = self._send(self._connection(), [], frame=True)
        return frame

    def screenshot(self) -> Screenshot:
        if self._acted:
            frame = settle(self._grab, np.array_equal, self.settle_timeout, self.settle_interval)
            self._acted = False
        else:
            frame = self._grab()
        self._last_frame = frame
        height, width = frame.shape[:2]
        url = self._encoder.data_url(frame.reshape(-1), width, height, RAWMODE, frozen=True)  # a copy of the fb
        self._prints.shot(self._encoder.serial, self._encoder.stale_rows)
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
        self._send(conn, self._release_events(self._keyboard.releases, True))

    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        frame = self._last_frame if from_last_screenshot else self._grab()
        if frame is None:
            raise DriverError("no screenshot has been taken on this driver yet", server=self.server)
        height, width = frame.shape[:2]
        return patch(frame.reshape(-1), width, height, x, y, radius)

    def fingerprint(self) -> np.ndarray:
        frame = self._last_frame
        if frame is None:
            raise DriverError("no screenshot has been taken on this driver yet", server=self.server)
        height, width = frame.shape[:2]
        return self._prints.of(frame.reshape(-1), width, height)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.alive:
            try:
                conn.send(self._release_events(self._keyboard.releases, True))
            except DriverError:
                pass
        conn.close()
