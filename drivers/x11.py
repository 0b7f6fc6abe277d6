"""The X11 driver: XTEST input on one python-xlib connection, mss (XShm) screenshots.

Every action is validated completely by :func:`cud.drivers.actions.plan` before
the first request is sent, and every key and button an action presses is released
in a ``finally`` even if it fails half-way. pyautogui is not used: it drives X
through python-xlib too, but cannot type non-ASCII text and adds PAUSE/FAILSAFE
behaviour we would have to switch off.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import mss
import mss.exception
from Xlib import X, error as xerror
from Xlib.display import Display
from Xlib.ext import xtest

from cud.errors import ActionRejected, DisplayUnavailable, DriverError

from . import actions as A
from .base import Driver
from .frames import patch, settle
from .png import PngEncoder, to_data_url
from .x11_keyboard import Keyboard

if TYPE_CHECKING:
    from openai.lib.computer import Screenshot

__all__ = ("X11Driver",)

#: Pause between the points of a drag path (a 1024-point path, the most allowed, takes ~5 s).
DRAG_STEP_SECONDS = 0.005

# A conservative pace for re-assigning borrowed keycodes mid-text (see x11_keyboard).
DRAIN_BASE_SECONDS = 0.05
DRAIN_SECONDS_PER_KEY_EVENT = 0.0005
DRAIN_SETTLE_TIMEOUT = 1.0

# Failures that mean the X server is gone or unusable; anything else is a bug.
_CONNECTION_ERRORS = (xerror.DisplayError, xerror.ConnectionClosedError, OSError, mss.exception.ScreenShotError)


def _same_frame(a: Any, b: Any) -> bool:
    return bool(a.raw == b.raw)


def _grabber(name: str) -> mss.MSS:
    try:
        return mss.MSS(display=name)
    except mss.exception.ScreenShotError:
        # mss's default (XCB, XShm) backend rejects some servers' root visual
        # (TigerVNC's Xvnc); its plain Xlib backend reads them, a little slower.
        return mss.MSS(display=name, backend="xlib")


class _Connection:
    """One live connection to the X server: input, keymap, screenshots."""

    def __init__(self, name: str) -> None:
        self.dpy = Display(name)
        try:
            if not self.dpy.has_extension("XTEST"):
                raise DisplayUnavailable(f"X display {name!r} has no XTEST extension", display=name)
            self.async_errors: list[xerror.XError] = []
            self.dpy.set_error_handler(lambda err, *_: self.async_errors.append(err))
            self.root = self.dpy.screen().root
            # ConfigureNotify tells us about resolution changes without a round trip per action.
            self.root.change_attributes(event_mask=X.StructureNotifyMask)
            geometry = self.root.get_geometry()
            self.size = (geometry.width, geometry.height)
            self.buttons = len(self.dpy.get_pointer_mapping())
            self.grabber = _grabber(name)
            self.keyboard = Keyboard(self.dpy, self.wait_for_clients)
        except BaseException:
            self.dpy.close()
            raise

    def pump(self) -> None:
        """Handle queued events: keymap and screen-size changes."""
        while self.dpy.pending_events():
            event = self.dpy.next_event()
            if event.type == X.MappingNotify and event.request == X.MappingKeyboard:
                self.keyboard.refresh()
            elif event.type == X.ConfigureNotify and event.window == self.root:
                self.size = (event.width, event.height)

    def wait_for_clients(self, key_events: int) -> None:
        """Give clients time to handle ``key_events`` queued keys before a keycode changes meaning.

        Nothing in X tells when another client has processed an event, so: at least
        a pause proportional to the backlog, then until the screen stops changing.
        """
        time.sleep(DRAIN_BASE_SECONDS + key_events * DRAIN_SECONDS_PER_KEY_EVENT)
        settle(self.grab, _same_frame, DRAIN_SETTLE_TIMEOUT)

    def grab(self) -> Any:
        width, height = self.size
        return self.grabber.grab({"left": 0, "top": 0, "width": width, "height": height})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.grabber.close()
        with contextlib.suppress(Exception):
            self.dpy.close()


class X11Driver(Driver):
    """Drive one X display. ``display=None`` means ``$DISPLAY``."""

    def __init__(self, display: str | None = None, *, wait_seconds: float = 1.0, settle_timeout: float = 1.0,
                 settle_interval: float = 0.02) -> None:
        name = display if display is not None else os.environ.get("DISPLAY", "")
        if not name:
            raise DisplayUnavailable("no X display given and $DISPLAY is not set", display=name)
        self.display = name
        self.wait_seconds = wait_seconds
        self.settle_timeout = settle_timeout
        self.settle_interval = settle_interval
        self._conn: _Connection | None = None
        self._encoder = PngEncoder()
        self._last_frame: Any = None
        # Input was sent since the last screenshot: the next one waits for the screen to
        # settle. True at first too: we do not know what happened before we came.
        self._acted = True
        self._buttons_held: list[int] = []

    # -- connection --------------------------------------------------------------
    @contextlib.contextmanager
    def _session(self) -> Iterator[_Connection]:
        """The live connection, made on demand; a dead server becomes DisplayUnavailable."""
        try:
            if self._conn is None:
                self._conn = _Connection(self.display)
            self._conn.pump()
            yield self._conn
            if self._conn.async_errors:
                err = self._conn.async_errors.pop(0)
                self._conn.async_errors.clear()
                raise DriverError(f"X server rejected a request on {self.display}: {err}", display=self.display)
        except _CONNECTION_ERRORS as exc:
            self._drop()
            raise DisplayUnavailable(f"X display {self.display!r} is unavailable: {exc}", display=self.display) from exc

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._buttons_held.clear()

    @property
    def screen_size(self) -> tuple[int, int]:
        with self._session() as conn:
            return conn.size

    # -- input primitives -------------------------------------------------------
    def _pointer(self, conn: _Connection, kind: int, detail: int = 0, x: int = 0, y: int = 0) -> None:
        if kind == X.MotionNotify:
            xtest.fake_input(conn.dpy, X.MotionNotify, x=x, y=y)
            return
        xtest.fake_input(conn.dpy, kind, detail)
        if kind == X.ButtonPress:
            self._buttons_held.append(detail)
        elif detail in self._buttons_held:
            self._buttons_held.remove(detail)

    @contextlib.contextmanager
    def _holding(self, conn: _Connection, keys: tuple[int, ...]) -> Iterator[None]:
        """Hold ``keys`` for the block; whatever happens, release every key and button pressed."""
        keyboard = conn.keyboard
        try:
            keyboard.prepare(keys)
            for keysym in keys:
                keyboard.press_keysym(keysym)
            yield
        finally:
            with contextlib.suppress(*_CONNECTION_ERRORS):
                for button in reversed(self._buttons_held):
                    xtest.fake_input(conn.dpy, X.ButtonRelease, button)
                self._buttons_held.clear()
                keyboard.release_held()
                conn.dpy.sync()
            self._acted = True

    def _act(self, action: Any) -> A.Plan:
        with self._session() as conn:
            step = A.plan(action, conn.size)
            self._run(conn, step)
            return step

    def _run(self, conn: _Connection, step: A.Plan) -> None:
        if isinstance(step, A.Click):
            if step.button > conn.buttons:
                raise ActionRejected(
                    f"mouse button {step.button} is not on this display's pointer ({conn.buttons} buttons)",
                    button=step.button,
                )
            with self._holding(conn, step.keys):
                self._pointer(conn, X.MotionNotify, x=step.x, y=step.y)
                for _ in range(step.count):
                    self._pointer(conn, X.ButtonPress, step.button)
                    self._pointer(conn, X.ButtonRelease, step.button)
        elif isinstance(step, A.Move):
            with self._holding(conn, step.keys):
                self._pointer(conn, X.MotionNotify, x=step.x, y=step.y)
        elif isinstance(step, A.Drag):
            with self._holding(conn, step.keys):
                (x0, y0), rest = step.path[0], step.path[1:]
                self._pointer(conn, X.MotionNotify, x=x0, y=y0)
                self._pointer(conn, X.ButtonPress, A.BUTTONS["left"])
                for x, y in rest:
                    # Apps merge motion events that queue up; a moment per point lets
                    # them see the whole path, not just its end.
                    conn.dpy.sync()
                    time.sleep(DRAG_STEP_SECONDS)
                    self._pointer(conn, X.MotionNotify, x=x, y=y)
                self._pointer(conn, X.ButtonRelease, A.BUTTONS["left"])
        elif isinstance(step, A.Scroll):
            with self._holding(conn, step.keys):
                self._pointer(conn, X.MotionNotify, x=step.x, y=step.y)
                for button, notches in step.wheel:
                    for _ in range(notches):
                        self._pointer(conn, X.ButtonPress, button)
                        self._pointer(conn, X.ButtonRelease, button)
        elif isinstance(step, A.Keypress):
            with self._holding(conn, step.keys):
                pass  # pressed in order by _holding, released in reverse on the way out
        elif isinstance(step, A.TypeText):
            with self._holding(conn, ()):
                caps_lock = bool(conn.root.query_pointer().mask & X.LockMask)
                conn.keyboard.type(step.keysyms, caps_lock=caps_lock)

    def screenshot(self) -> Screenshot:
        with self._session() as conn:
            if self._acted:
                frame = settle(conn.grab, _same_frame, self.settle_timeout, self.settle_interval)
                # The screen stopped changing, so clients have handled our keys:
                # borrowed keycodes can go back now without changing what was typed.
                conn.keyboard.restore(settled=True)
                self._acted = False
            else:
                frame = conn.grab()
            self._last_frame = frame
            width, height = frame.size
            png = self._encoder.encode(frame.raw, width, height)
        return {"type": "computer_screenshot", "image_url": to_data_url(png)}

    # -- what the daemon needs besides ------------------------------------------
    def peek(self) -> Screenshot:
        with self._session() as conn:
            frame = conn.grab()
            png = self._encoder.encode(frame.raw, *frame.size)
        return {"type": "computer_screenshot", "image_url": to_data_url(png)}

    def release_all(self) -> None:
        with self._session() as conn:
            keys = conn.dpy.query_keymap()
            for index, byte in enumerate(keys):
                for bit in range(8):
                    if byte & (1 << bit):
                        xtest.fake_input(conn.dpy, X.KeyRelease, index * 8 + bit)
            mask = conn.root.query_pointer().mask
            for button, held in enumerate((X.Button1Mask, X.Button2Mask, X.Button3Mask, X.Button4Mask,
                                           X.Button5Mask), start=1):
                if mask & held:
                    xtest.fake_input(conn.dpy, X.ButtonRelease, button)
            conn.keyboard.restore(settled=False)
            conn.dpy.sync()

    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        with self._session() as conn:
            frame = self._last_frame if from_last_screenshot else conn.grab()
            if frame is None:
                raise DriverError("no screenshot has been taken on this driver yet", display=self.display)
            width, height = frame.size
            return patch(frame.raw, width, height, x, y, radius)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(*_CONNECTION_ERRORS, DriverError):
                self.release_all()
        self._drop()
