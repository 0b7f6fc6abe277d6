"""Which X window is where: the top-level client window at a point, and the focused one.

Read-only, on its own python-xlib connection (the driver's belongs to the driver's
thread, and python-xlib is not thread-safe). Every call is bounded like the
driver's: :class:`~cud.drivers.deadline.Deadline` cuts the socket of a call that
gets no answer within ``timeout``, and the next call connects afresh.

Windows change while they are read: a window closes between two requests (it is left out:
:data:`_GONE`), and a property changes between two requests for its parts. python-xlib's
``get_full_property`` (and ``get_wm_class``, ``get_wm_name``) asks for the first 40 bytes,
then for the rest from there: a title or client list that shrank in between makes the X
server answer ``BadValue``, and one deleted in between an ``AttributeError`` of the library.
Here every property is read in one request (:func:`_read`, up to :data:`MAX_PROPERTY_LONGS`),
which the server answers from one state of the window.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display

from cud.drivers.xlib_display import open_display
from cud.errors import DisplayUnavailable, DriverTimeout

from .deadline import Deadline, probe_x_server, shut_down_fd

__all__ = ("WindowInfo", "X11Windows", "process_name")

#: How far below a window manager's frame the client window (the one with WM_STATE) may be.
_CLIENT_SEARCH_DEPTH = 3
#: A window destroyed between two requests of one lookup.
_GONE = (xerror.BadWindow, xerror.BadDrawable, xerror.BadMatch)
_ERRORS = (xerror.DisplayError, xerror.ConnectionClosedError, xerror.XError, OSError)
#: 32-bit units one property read asks for: far above a title's or a client list's (1 MiB).
MAX_PROPERTY_LONGS = 1 << 18
#: X coordinates are 16-bit: a point past them is on no screen (and python-xlib could not send it).
_COORD = range(-(2**15), 2**15)


def _read(window: Any, atom: int, kind: int) -> Any:
    """The value of ``window``'s property ``atom`` (of type ``kind``, X.AnyPropertyType for any), read in one
    request; None if it has none."""
    prop = window.get_property(atom, kind, 0, MAX_PROPERTY_LONGS)
    return None if prop is None else prop.value


def _text(value: Any, encoding: str) -> str:
    return value.decode(encoding, "replace") if isinstance(value, bytes) else str(value or "")


@dataclass(frozen=True)
class WindowInfo:
    id: int
    wm_class: str  # the class half of WM_CLASS ("Chromium", "XTerm"), "" if unset
    instance: str  # the instance half ("chromium", "xterm")
    title: str
    pid: int | None
    process: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "class": self.wm_class, "instance": self.instance, "title": self.title,
                "pid": self.pid, "process": self.process}


def process_name(pid: int | None) -> str | None:
    """The command name of ``pid`` (``/proc/PID/comm``); None if it is gone or not ours to see."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


class X11Windows:
    """Look up windows on ``display``; every call raises DisplayUnavailable or DriverTimeout, nothing else."""

    def __init__(self, display: str, timeout: float = 0.1) -> None:
        self.display = display
        self._deadline = Deadline(timeout)
        self._dpy: Display | None = None
        self._atoms: dict[str, int] = {}

    @property
    def timeout(self) -> float:
        return self._deadline.timeout

    def window_at(self, x: int, y: int) -> WindowInfo | None:
        """The client window shown at (x, y) on the screen; None over the bare root window."""
        if x not in _COORD or y not in _COORD:
            return None
        with self._session("window_at") as dpy:
            root = dpy.screen().root
            reply = root.translate_coords(root, x, y)
            top = reply.child
            if not top or top == X.NONE:
                return None
            try:
                client = self._client(dpy, top, _CLIENT_SEARCH_DEPTH) or top
                return self._info(dpy, client)
            except _GONE:
                return None  # it closed while we looked

    def active_window(self) -> WindowInfo | None:
        """The window the window manager says has the focus (_NET_ACTIVE_WINDOW); None if none."""
        with self._session("active_window") as dpy:
            root = dpy.screen().root
            active = _read(root, self._atom(dpy, "_NET_ACTIVE_WINDOW"), Xatom.WINDOW)
            if not active or not active[0]:
                return None
            try:
                return self._info(dpy, dpy.create_resource_object("window", int(active[0])))
            except _GONE:
                return None

    def client_windows(self) -> list[WindowInfo]:
        """Every window the window manager manages (``_NET_CLIENT_LIST``, oldest first), mapped or not.

        Without a window manager that keeps the list, the top-level windows' clients instead.
        """
        with self._session("client_windows") as dpy:
            root = dpy.screen().root
            clients = _read(root, self._atom(dpy, "_NET_CLIENT_LIST"), Xatom.WINDOW)
            if clients is not None:
                found = [dpy.create_resource_object("window", int(w)) for w in clients]
            else:
                tops = root.query_tree().children
                found = [c for c in (self._client_or_none(dpy, top) for top in tops) if c is not None]
            windows = []
            for window in found:
                try:
                    windows.append(self._info(dpy, window))
                except _GONE:
                    continue  # it closed while we looked
            return windows

    def connect(self, timeout: float) -> None:
        """Connect now, allowing ``timeout`` seconds (more than a lookup's): a first lookup then only looks."""
        budget, self._deadline.timeout = self._deadline.timeout, timeout
        try:
            with self._session("connect"):
                pass
        finally:
            self._deadline.timeout = budget

    def close(self) -> None:
        self._drop()

    # -- the connection ---------------------------------------------------------------
    @contextlib.contextmanager
    def _session(self, what: str) -> Any:
        try:
            with self._deadline.bound(what, self._cut):
                if self._dpy is None:
                    probe_x_server(self.display, self.timeout)
                    self._dpy = open_display(self.display)
                    self._dpy.set_error_handler(lambda *_: None)  # a window closing under us is not an error
                    self._atoms.clear()
                yield self._dpy
        except _ERRORS as exc:
            self._drop()
            if self._deadline.expired == what:
                raise DriverTimeout(f"X display {self.display!r} did not answer within {self.timeout:g} s ({what})",
                                    display=self.display, call=what, timeout=self.timeout) from exc
            raise DisplayUnavailable(f"X display {self.display!r} is unavailable: {exc}",
                                     display=self.display) from exc

    def _cut(self) -> None:
        if self._dpy is not None:
            shut_down_fd(self._dpy.fileno())

    def _drop(self) -> None:
        if self._dpy is not None:
            with contextlib.suppress(Exception):
                self._dpy.close()
        self._dpy = None

    def _atom(self, dpy: Display, name: str) -> int:
        if name not in self._atoms:
            self._atoms[name] = dpy.intern_atom(name)
        return self._atoms[name]

    # -- reading windows -----------------------------------------------------------------
    def _client(self, dpy: Display, window: Any, depth: int) -> Any:
        """The window at or below ``window`` that has WM_STATE: what the WM manages, not its frame."""
        if window.get_property(self._atom(dpy, "WM_STATE"), X.AnyPropertyType, 0, 0) is not None:
            return window
        if depth == 0:
            return None
        for child in reversed(window.query_tree().children):  # top of the stacking order first
            found = self._client(dpy, child, depth - 1)
            if found is not None:
                return found
        return None

    def _client_or_none(self, dpy: Display, top: Any) -> Any:
        """:meth:`_client` of a top-level window; None if it closed while we looked."""
        try:
            return self._client(dpy, top, _CLIENT_SEARCH_DEPTH)
        except _GONE:
            return None

    def _info(self, dpy: Display, window: Any) -> WindowInfo:
        parts = _text(_read(window, Xatom.WM_CLASS, Xatom.STRING), "latin-1").split("\0")
        instance, wm_class = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
        title = _text(_read(window, self._atom(dpy, "_NET_WM_NAME"), self._atom(dpy, "UTF8_STRING")), "utf-8") \
            or _text(_read(window, Xatom.WM_NAME, Xatom.STRING), "latin-1")
        pids = _read(window, self._atom(dpy, "_NET_WM_PID"), Xatom.CARDINAL)
        pid = int(pids[0]) if pids is not None and len(pids) else None
        return WindowInfo(id=int(window.id), instance=instance, wm_class=wm_class, title=title,
                          pid=pid, process=process_name(pid))
