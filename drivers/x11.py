"""The X11 driver: XTEST input on one python-xlib connection, mss (XShm) screenshots.

Every action is validated completely by :func:`cud.drivers.actions.plan` before
the first request is sent, and every key and button an action presses is released
in a ``finally`` even if it fails half-way. pyautogui is not used: it drives X
through python-xlib too, but cannot type non-ASCII text and adds PAUSE/FAILSAFE
behaviour we would have to switch off.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import mss
import mss.exception
from Xlib import X
from Xlib import error as xerror
from Xlib.ext import damage, xtest

from cud.drivers.xlib_display import open_display
from cud.errors import ActionRejected, DisplayUnavailable, DriverError, DriverTimeout

from . import actions as A
from .base import Driver
from .deadline import Deadline, probe_x_server, shut_down_fd
from .drag_motion import drag_motion
from .frames import ScreenPrints, patch, settle
from .keys import KEYMAP_SETTLE_SECONDS
from .png import PngEncoder, PngSettings
from .x11_keyboard import Keyboard

if TYPE_CHECKING:
    from openai.lib.computer import Screenshot

__all__ = ("X11Driver",)

# A conservative pace for re-assigning borrowed keycodes mid-text (see x11_keyboard).
DRAIN_BASE_SECONDS = 0.05
DRAIN_SECONDS_PER_KEY_EVENT = 0.0005
DRAIN_SETTLE_TIMEOUT = 1.0

# Failures that mean the X server is gone or unusable; anything else is a bug.
_CONNECTION_ERRORS = (xerror.DisplayError, xerror.ConnectionClosedError, OSError, mss.exception.ScreenShotError)


def _same_frame(a: Any, b: Any) -> bool:
    return bool(a.raw == b.raw)


def _grabber_fd(grabber: mss.MSS) -> int | None:
    """The socket of mss's own X connection, to shut it down when a grab hangs.

    mss keeps it inside its backend: libxcb's (``conn``, whose descriptor libxcb
    gives out) or libX11's (``_handles.display``, through ``XConnectionNumber``).
    """
    impl = getattr(grabber, "_impl", None)
    conn = getattr(impl, "conn", None)
    if conn is not None:
        return int(_library("xcb", "libxcb.so.1", "xcb_get_file_descriptor").xcb_get_file_descriptor(_address(conn)))
    display = getattr(getattr(impl, "_handles", None), "display", None)
    if display:
        return int(_library("X11", "libX11.so.6", "XConnectionNumber").XConnectionNumber(_address(display)))
    return None


@functools.cache
def _library(name: str, fallback: str, function: str) -> ctypes.CDLL:
    """The C library ``name`` with ``function`` taking a pointer; found once (find_library runs ldconfig)."""
    library = ctypes.CDLL(ctypes.util.find_library(name) or fallback)
    getattr(library, function).argtypes = [ctypes.c_void_p]
    return library


def _address(handle: Any) -> ctypes.c_void_p:
    """A C pointer to ``handle``, which mss keeps as a structure or as a pointer to one."""
    if isinstance(handle, ctypes.Structure):
        return ctypes.c_void_p(ctypes.addressof(handle))
    return ctypes.cast(handle, ctypes.c_void_p)


def _grabber(name: str) -> mss.MSS:
    try:
        return mss.MSS(display=name)
    except mss.exception.ScreenShotError:
        # mss's default (XCB, XShm) backend rejects some servers' root visual
        # (TigerVNC's Xvnc); its plain Xlib backend reads them, a little slower.
        return mss.MSS(display=name, backend="xlib")


class _Connection:
    """One live connection to the X server: input, keymap, screenshots."""

    def __init__(self, name: str, progress: Callable[[], None]) -> None:
        #: Called whenever the server has answered, so a long call is bounded per answer.
        self.progress = progress
        self.dpy = open_display(name)
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
            self.name = name
            #: mss, with its own X connection and shared memory the size of the screen: made at the first
            #: grab, let go of between tasks (``drop_grabber``).
            self.grabber: mss.MSS | None = None
            self.grabber_fd: int | None = None
            self.keyboard = Keyboard(self.dpy, self.wait_for_clients)
            #: DAMAGE on the root, which settling watches (None: the server has none, and settling compares
            #: frames); ``damaged`` counts its DamageNotify events read so far.
            self.damage = self._watch_damage()
            self.damaged = 0
            #: Its events' type on this connection (python-xlib makes each display its own event class).
            self.damage_event = self.dpy.extension_event.DamageNotify if self.damage is not None else -1
        except BaseException:
            self.dpy.close()
            raise

    def _watch_damage(self) -> int | None:
        if not self.dpy.has_extension("DAMAGE"):
            return None
        self.dpy.damage_query_version()  # the extension takes no other request before it
        # ReportNonEmpty: one event when something is drawn after the region was emptied (``settle``), so
        # unread events stay at one however much is drawn between screenshots.
        return int(self.root.damage_create(damage.DamageReportNonEmpty))

    def pump(self) -> None:
        """Handle queued events: keymap and screen-size changes, drawing on the screen."""
        while self.dpy.pending_events():
            event = self.dpy.next_event()
            if event.type == self.damage_event:
                self.damaged += 1
            elif event.type == X.MappingNotify and event.request == X.MappingKeyboard:
                self.keyboard.refresh()
            elif event.type == X.ConfigureNotify and event.window == self.root:
                self.size = (event.width, event.height)

    def wait_for_clients(self, key_events: int) -> None:
        """Give clients time to handle ``key_events`` queued keys before a keycode changes meaning.

        Nothing in X tells when another client has processed an event, so: at least
        a pause proportional to the backlog, then until the screen stops changing.
        """
        time.sleep(DRAIN_BASE_SECONDS + key_events * DRAIN_SECONDS_PER_KEY_EVENT)
        # Frames, not DAMAGE: this runs mid-text, where reading events (``pump``) could re-read the keymap
        # between a keycode's loan and its use.
        settle(self.grab, _same_frame, DRAIN_SETTLE_TIMEOUT)

    def settle(self, timeout: float, interval: float) -> Any:
        """A frame of a screen on which nothing was drawn for ``interval``; the last one when ``timeout`` passes.

        With DAMAGE the server tells whether anything was drawn, so waiting costs a round trip an
        ``interval`` and one grab, where comparing frames grabs and compares a whole frame each time
        (docs/benchmarks.md). The frame is kept only if nothing was drawn from the quiet interval's
        start to the grab's end, so it is as still as two identical frames would show.
        """
        deadline = time.monotonic() + timeout
        drawn: Any = None  # the frame grabbed after the last interval with drawing, from the second one on
        repainting = False
        while self.damage is not None and time.monotonic() < deadline:
            self.dpy.damage_subtract(self.damage)  # emptied: what is drawn next sends one DamageNotify
            # Reading events sends what python-xlib holds first, so the server empties the region now, not
            # with the next round trip (which would empty what the interval drew). Events it sent before,
            # read now or later, can only make the wait longer.
            self.pump()
            seen = self.damaged
            time.sleep(interval)
            self.sync()  # every event the server sent before answering has been read
            self.pump()
            if self._damage_lost():
                continue
            if self.damaged != seen:
                # Drawing is not change: an app that repaints the same pixels is never quiet to DAMAGE, so from
                # the second interval with drawing on, two identical frames end the wait too, as without it.
                if repainting:
                    frame = self.grab()
                    if drawn is not None and _same_frame(drawn, frame):
                        return frame
                    drawn = frame
                repainting = True
                continue
            frame = self.grab()
            self.sync()
            self.pump()
            if self.damaged == seen:
                return frame
        if self.damage is None:
            return settle(self.grab, _same_frame, max(0.0, deadline - time.monotonic()), interval)
        return self.grab()

    def _damage_lost(self) -> bool:
        """Whether another client freed our DAMAGE object (X lets any client free any resource): then the
        region was never emptied, its error is ours to swallow, and settling compares frames from now on
        on this connection, rather than every screenshot failing on it."""
        lost = [err for err in self.async_errors if getattr(err, "resource_id", None) == self.damage]
        if not lost:
            return False
        self.async_errors[:] = [err for err in self.async_errors if err not in lost]
        self.damage = None
        return True

    def grab(self) -> Any:
        width, height = self.size
        if self.grabber is None:
            self.grabber = _grabber(self.name)
            self.grabber_fd = _grabber_fd(self.grabber)
        try:
            frame = self.grabber.grab({"left": 0, "top": 0, "width": width, "height": height})
        except AssertionError as exc:  # mss asserts on a reply its dead XCB connection never gave
            raise mss.exception.ScreenShotError(f"the screenshot connection was lost: {exc!r}") from exc
        self.progress()
        return frame

    def sync(self) -> None:
        self.dpy.sync()
        self.progress()

    def cut(self) -> None:
        """Shut both sockets down (from another thread): a read blocked on either returns."""
        shut_down_fd(self.dpy.fileno())
        if self.grabber_fd is not None:
            shut_down_fd(self.grabber_fd)

    def drop_grabber(self) -> None:
        grabber, self.grabber, self.grabber_fd = self.grabber, None, None
        if grabber is not None:
            with contextlib.suppress(Exception):
                grabber.close()

    def close(self) -> None:
        self.drop_grabber()
        with contextlib.suppress(Exception):
            self.dpy.close()


class X11Driver(Driver):
    """Drive one X display. ``display=None`` means ``$DISPLAY``.

    ``timeout`` bounds every call: past that many seconds without an answer from the
    server (a stopped X server never answers; python-xlib and libxcb would wait
    forever) the connection is cut from a watchdog thread and the call raises
    ``DriverTimeout`` naming it; the next call connects afresh.
    """

    def __init__(self, display: str | None = None, *, wait_seconds: float = 1.0, settle_timeout: float = 1.0,
                 settle_interval: float = 0.02, timeout: float = 10.0, png: PngSettings | None = None) -> None:
        name = display if display is not None else os.environ.get("DISPLAY", "")
        if not name:
            raise DisplayUnavailable("no X display given and $DISPLAY is not set", display=name)
        self.display = name
        self.wait_seconds = wait_seconds
        self.settle_timeout = settle_timeout
        self.settle_interval = settle_interval
        self._conn: _Connection | None = None
        self._encoder = PngEncoder(png)
        self._last_frame: Any = None
        self._prints = ScreenPrints()
        # Input was sent since the last screenshot: the next one waits for the screen to
        # settle. True at first too: we do not know what happened before we came.
        self._acted = True
        self._buttons_held: list[int] = []
        #: When the pointer may move again after the last release (see RELEASE_SETTLE_SECONDS).
        self._pointer_free_at = 0.0
        self._deadline = Deadline(timeout)

    @property
    def timeout(self) -> float:
        return self._deadline.timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._deadline.timeout = value

    # -- connection --------------------------------------------------------------
    @contextlib.contextmanager
    def _session(self, what: str) -> Iterator[_Connection]:
        """The live connection, made on demand; a dead server becomes DisplayUnavailable, a hung one DriverTimeout."""
        try:
            with self._deadline.bound(what, self._cut):
                if self._conn is None:
                    probe_x_server(self.display, self.timeout)
                    self._conn = _Connection(self.display, self._deadline.progress)
                self._conn.pump()
                yield self._conn
            if self._deadline.expired == what:
                # Cut, though the call got to its end: what it sent after the cut was lost.
                raise xerror.ConnectionClosedError("the connection was cut")
            if self._conn.async_errors:
                err = self._conn.async_errors.pop(0)
                self._conn.async_errors.clear()
                raise DriverError(f"X server rejected a request on {self.display}: {err}", display=self.display)
        except _CONNECTION_ERRORS as exc:
            self._drop()
            if self._deadline.expired == what:
                raise DriverTimeout(
                    f"X display {self.display!r} did not answer within {self.timeout:g} s ({what}); "
                    "the connection was dropped and the next call reconnects",
                    display=self.display, call=what, timeout=self.timeout) from exc
            raise DisplayUnavailable(f"X display {self.display!r} is unavailable: {exc}", display=self.display) from exc

    def _cut(self) -> None:
        if self._conn is not None:
            self._conn.cut()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._buttons_held.clear()

    @property
    def screen_size(self) -> tuple[int, int]:
        with self._session("screen_size") as conn:
            return conn.size

    # -- input primitives -------------------------------------------------------
    def _pointer(self, conn: _Connection, kind: int, detail: int = 0, x: int = 0, y: int = 0) -> None:
        free_at = self._pointer_free_at
        if kind == X.ButtonPress:
            # After a keymap change a window manager re-grabs its keys, and its click-to-focus
            # grab holds a press until it is done (seen: xterm got a click 0.3 s late, its
            # release at the next point, right after borrowed keycodes were given back).
            free_at = max(free_at, conn.keyboard.changed_at + KEYMAP_SETTLE_SECONDS)
        if (wait := free_at - time.monotonic()) > 0:
            time.sleep(wait)
        if kind == X.MotionNotify:
            xtest.fake_input(conn.dpy, X.MotionNotify, x=x, y=y)
            return
        xtest.fake_input(conn.dpy, kind, detail)
        if kind == X.ButtonPress:
            self._buttons_held.append(detail)
        elif detail in self._buttons_held:
            self._buttons_held.remove(detail)

    def _button(self, conn: _Connection, button: int) -> None:
        """A click of ``button`` as a person makes it: held a moment, then time to land (see actions)."""
        self._pointer(conn, X.ButtonPress, button)
        conn.sync()
        time.sleep(A.BUTTON_HOLD_SECONDS)
        self._pointer(conn, X.ButtonRelease, button)
        self._released(conn)

    def _released(self, conn: _Connection) -> None:
        conn.sync()
        self._pointer_free_at = time.monotonic() + A.RELEASE_SETTLE_SECONDS

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
                conn.sync()
            self._acted = True

    def _act(self, action: Any) -> A.Plan:
        kind = action.get("type") if isinstance(action, dict) else getattr(action, "type", None)
        with self._session(str(kind)) as conn:
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
                for index in range(step.count):
                    if index:
                        # Let the server stamp the next press later (see DOUBLE_CLICK_GAP_SECONDS).
                        time.sleep(A.DOUBLE_CLICK_GAP_SECONDS)
                    self._button(conn, step.button)
        elif isinstance(step, A.Move):
            with self._holding(conn, step.keys):
                self._pointer(conn, X.MotionNotify, x=step.x, y=step.y)
        elif isinstance(step, A.Drag):
            with self._holding(conn, step.keys):
                self._pointer(conn, X.MotionNotify, x=step.path[0][0], y=step.path[0][1])
                self._pointer(conn, X.ButtonPress, A.BUTTONS["left"])
                conn.sync()
                # Each pause starts once the server has what came before it (see drag_motion).
                motion = drag_motion(step.path, conn.size)
                for tick in motion.ticks:
                    time.sleep(tick.pause)
                    for x, y in tick.points:
                        self._pointer(conn, X.MotionNotify, x=x, y=y)
                    conn.sync()
                time.sleep(motion.dwell)
                self._pointer(conn, X.ButtonRelease, A.BUTTONS["left"])
                self._released(conn)
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
        with self._session("screenshot") as conn:
            if self._acted:
                frame = conn.settle(self.settle_timeout, self.settle_interval)
                # The screen stopped changing, so clients have handled our keys:
                # borrowed keycodes can go back now without changing what was typed.
                conn.keyboard.restore(settled=True)
                self._acted = False
            else:
                frame = conn.grab()
            self._last_frame = frame
            url = self._encoder.data_url(frame.raw, *frame.size, frozen=True)  # mss grabs into a new buffer
            self._prints.shot(self._encoder.serial, self._encoder.stale_rows)
        return {"type": "computer_screenshot", "image_url": url}

    # -- what the daemon needs besides ------------------------------------------
    def peek(self) -> Screenshot:
        with self._session("peek") as conn:
            frame = conn.grab()
            url = self._encoder.data_url(frame.raw, *frame.size, frozen=True)  # mss grabs into a new buffer
        return {"type": "computer_screenshot", "image_url": url}

    def probe(self) -> tuple[int, int]:
        with self._session("probe") as conn:
            conn.sync()
            return conn.size

    def rest(self) -> None:
        self._last_frame = None
        self._encoder.forget()
        if self._conn is not None:  # its shared memory is a frame's worth, and a task's first grab makes it again
            self._conn.drop_grabber()

    def release_all(self) -> None:
        with self._session("release_all") as conn:
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
            conn.sync()

    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        with self._session("target_patch") as conn:
            frame = self._last_frame if from_last_screenshot else conn.grab()
            if frame is None:
                raise DriverError("no screenshot has been taken on this driver yet", display=self.display)
            width, height = frame.size
            return patch(frame.raw, width, height, x, y, radius)

    def fingerprint(self) -> Any:
        frame = self._last_frame
        if frame is None:
            raise DriverError("no screenshot has been taken on this driver yet", display=self.display)
        return self._prints.of(frame.raw, *frame.size)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(*_CONNECTION_ERRORS, DriverError):
                self.release_all()
        self._drop()
