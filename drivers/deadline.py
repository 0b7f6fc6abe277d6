"""Time limits for calls that block in a library without timeouts (python-xlib, libxcb).

A stopped X server (SIGSTOP, a hung VM console) never answers, and python-xlib
and libxcb wait for it forever. :class:`Deadline` bounds each call from one
long-lived watchdog thread: when a call overruns, the thread runs the call's
``cut`` callback, which shuts the connection's sockets down. A read blocked in
another thread then returns at once with an error, the call fails, and the
caller turns that into ``DriverTimeout``. Arming and disarming is a lock and a
notify; no thread or timer is made per call.

:func:`probe_x_server` checks that an X server answers at all before a library
connects to it, since the connection's sockets only exist once that library's
connect call has returned.
"""

from __future__ import annotations

import contextlib
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

from cud.errors import DisplayUnavailable, DriverTimeout

__all__ = ("Deadline", "shut_down_fd", "probe_x_server")


class Deadline:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        #: The call that overran, once the watchdog has cut its connection.
        self.expired: str | None = None
        self._cond = threading.Condition()
        self._due: float | None = None
        self._what = ""
        self._cut: Callable[[], None] | None = None
        self._cutting = False
        self._thread: threading.Thread | None = None
        #: When the watchdog's wait ends by itself (inf: it waits for a notify). A call armed after that
        #: needs no notify: the watchdog wakes first and waits on for the rest. With a fixed timeout that is
        #: every call but the first after a pause, so the watchdog does not wake (and take the GIL) per call.
        self._wakes_at = math.inf

    @contextlib.contextmanager
    def bound(self, what: str, cut: Callable[[], None]) -> Iterator[None]:
        """Run the block within ``timeout`` seconds, or have ``cut`` called from the watchdog."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="cud-x11-deadline", daemon=True)
                self._thread.start()
            self.expired = None
            self._due, self._what, self._cut = time.monotonic() + self.timeout, what, cut
            if self._due < self._wakes_at:
                self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._due = self._cut = None
                # A cut shuts sockets down by descriptor number. The block may end as soon as the first one
                # is shut; if the caller then closed its connection and made a new one while the cut went on,
                # the new connection could hold a number the cut still had to shut (seen: mss's new socket).
                while self._cutting:
                    self._cond.wait()

    def progress(self) -> None:
        """The call is alive and well (the server answered): give it ``timeout`` seconds from now."""
        with self._cond:
            if self._due is not None:
                self._due = time.monotonic() + self.timeout

    def _watch(self) -> None:
        while True:
            with self._cond:
                while self._due is None or (left := self._due - time.monotonic()) > 0:
                    self._wakes_at = math.inf if self._due is None else self._due
                    self._cond.wait(None if self._due is None else left)
                self._wakes_at = math.inf  # awake: it looks at the state before it waits again
                cut, self.expired = self._cut, self._what
                self._due = self._cut = None
                self._cutting = cut is not None
            if cut is not None:
                try:
                    with contextlib.suppress(Exception):  # the connection may already be gone
                        cut()
                finally:
                    with self._cond:
                        self._cutting = False
                        self._cond.notify_all()


def shut_down_fd(fd: int) -> None:
    """Shut a socket down by its descriptor without closing it (its owner still will)."""
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    finally:
        sock.detach()


def _x_address(display: str) -> tuple[socket.AddressFamily, list[object]]:
    host, _, rest = display.rpartition(":")
    number = int(rest.split(".")[0])
    if host in ("", "unix") or host.startswith("/"):
        return socket.AF_UNIX, [f"\0/tmp/.X11-unix/X{number}", f"/tmp/.X11-unix/X{number}"]
    return socket.AF_INET, [(host, 6000 + number)]


def probe_x_server(display: str, timeout: float) -> None:
    """Raise ``DriverTimeout`` if the X server of ``display`` accepts but does not answer a setup.

    Sends the 12-byte connection setup with no authorization: every X server answers
    it (Success, Failed or Authenticate) right away, whatever its access control.
    A server that is not there at all is left for the real connect to report.
    """
    try:
        family, addresses = _x_address(display)
    except ValueError:
        return  # not a name we can parse: the real connect will say what is wrong
    for address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            try:
                sock.connect(address)  # type: ignore[arg-type]  # a tuple or a path, by the family
            except OSError:
                continue
            sock.sendall(struct.pack("<cxHHHHxx", b"l", 11, 0, 0, 0))
            try:
                if sock.recv(8):
                    return
            except TimeoutError:
                raise DriverTimeout(
                    f"X display {display!r} did not answer within {timeout:g} s (connecting); is the server stopped?",
                    display=display, call="connect", timeout=timeout) from None
            except OSError as exc:
                raise DisplayUnavailable(f"X display {display!r} is unavailable: {exc}", display=display) from None
            return
        finally:
            sock.close()
