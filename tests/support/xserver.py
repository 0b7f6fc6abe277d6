"""Start and stop X servers for tests: Xvfb on a number it picks itself (-displayfd).

Tests only ever send input to servers started here, and stop them by pid. A test that
stops a server to start it again on the same number keeps the number meanwhile.
"""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .listeners import socket_inodes, unix_listeners

__all__ = ("XServer", "display_choice", "restart_xvfb", "start_xvfb", "stop_process", "reset_xlib_event_codes")


#: The network namespace the tests started in (pid 1's may not be readable): the machine's, for the tests.
_FIRST_NETWORK = os.readlink("/proc/self/ns/net")


def reset_xlib_event_codes() -> None:
    """Give python-xlib a clean table of extension event codes.

    python-xlib keeps that table in a class attribute shared by every connection of
    the process, so after talking to an Xvfb it cannot open an Xvnc display (whose
    extensions number their events differently) and vice versa. Call it when no
    connection to the other server is left open.
    """
    import Xlib.protocol.display
    import Xlib.protocol.event

    Xlib.protocol.display.Display.event_classes = Xlib.protocol.event.event_class.copy()


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always reaps the child."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class XServer:
    display: str
    proc: subprocess.Popen[bytes]
    width: int
    height: int
    log: Path
    #: While the server is down and the test means to start it again: its display's abstract socket name,
    #: bound (not listening) so that no other X server takes the number; clients see no server there.
    held: socket.socket | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, *, keep_number: bool = False) -> None:
        """Stop the server by pid. ``keep_number``: and keep its number from every other X server until
        ``restart_xvfb`` or ``stop``: a released number is the lowest free one, the next -displayfd's choice."""
        stop_process(self.proc)
        if keep_number:
            self._hold()
        else:
            self.release()

    def kill(self) -> None:
        """SIGKILL, as a crash; the number is kept as by ``stop(keep_number=True)``."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._hold()

    def release(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    def _hold(self) -> None:
        if self.held is not None:
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(_abstract_name(self.display).replace("@", "\0", 1))
        except OSError:
            sock.close()
            raise RuntimeError(f"another X server took {self.display} as soon as ours stopped") from None
        self.held = sock


def display_choice(write_fd: int, *, isolated: bool | None = None) -> list[str]:
    """How a new X server picks its number: ``-displayfd`` (the lowest free one) on the machine's own network, an
    explicit high number no other server uses in a network namespace of a test's own (``isolated``; None: whether
    this thread is in one).

    -displayfd tells a free number by binding the display's abstract socket, which lives in the network namespace:
    in another one every number looks free, and the new server then unlinks and takes over the path socket
    (/tmp/.X11-unix/XN) of the machine's server with that number, and removes it when it stops, so that server's
    clients get ENOENT or ECONNREFUSED (seen: a reset of test_session_reset_holes while test_session_network ran). Nor
    does the lock file stop it (seen: Xvfb :5 in a namespace started beside the machine's :5). So a namespace's
    servers take numbers far above the lowest free ones the machine's servers take, with neither socket nor lock."""
    if isolated is None:
        isolated = os.readlink("/proc/thread-self/ns/net") != _FIRST_NETWORK
    if not isolated:
        return ["-displayfd", str(write_fd)]
    for number in random.sample(range(300, 900), 600):
        if not any(os.path.lexists(p) for p in (f"/tmp/.X{number}-lock", f"/tmp/.X11-unix/X{number}")):
            return [f":{number}", "-displayfd", str(write_fd)]
    raise RuntimeError("no free X display number in 300..899")


def read_display_number(fd: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30.0) -> str:
    """Read the display number an X server writes to its -displayfd pipe."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or proc.poll() is not None:
            stop_process(proc)
            raise RuntimeError(f"X server did not report a display number; log: {log.read_text(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                continue
            data += chunk
    return ":" + data.decode().strip()


def start_xvfb(log_dir: Path, width: int = 1280, height: int = 800, depth: int = 24,
               auth: Path | None = None, extra: tuple[str, ...] = ()) -> XServer:
    """A new Xvfb on a free display; with ``auth``, only holders of a cookie in that file may connect;
    ``extra``: more of Xvfb's options (``-extension DAMAGE`` leaves an extension out)."""
    log = log_dir / "xvfb.log"
    read_fd, write_fd = os.pipe()
    with open(log, "wb") as log_file:
        proc = subprocess.Popen(
            ["Xvfb", *display_choice(write_fd), "-screen", "0", f"{width}x{height}x{depth}",
             "-nolisten", "tcp", "-noreset", *(["-auth", str(auth)] if auth is not None else []), *extra],
            pass_fds=(write_fd,), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
        )
    os.close(write_fd)
    try:
        display = read_display_number(read_fd, proc, log)
    finally:
        os.close(read_fd)
    return XServer(display, proc, width, height, log)


def restart_xvfb(old: XServer) -> XServer:
    """A new Xvfb on the display number ``old`` chose (it must be dead, and kept: ``stop(keep_number=True)``
    or ``kill()``), same size; an error, not someone else's server, if another took the number."""
    assert old.proc.poll() is not None, "the old server still runs"
    old.release()  # the number is ours: the old server picked it with -displayfd
    with open(old.log, "ab") as log_file:
        # A stale lock of a killed server is removed by the new one.
        proc = subprocess.Popen(
            ["Xvfb", old.display, "-screen", "0", f"{old.width}x{old.height}x24", "-nolisten", "tcp", "-noreset"],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    # Its own listener on the display's socket: another X server answering there is not it.
    while not unix_listeners(_abstract_name(old.display)) & socket_inodes(proc.pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process(proc)
            raise RuntimeError(f"Xvfb {old.display} did not come back; log: {old.log.read_text(errors='replace')}")
        time.sleep(0.1)
    return XServer(old.display, proc, old.width, old.height, old.log)


def _abstract_name(display: str) -> str:
    """The abstract socket an X server on ``display`` listens on, as /proc/net/unix writes it."""
    return f"@/tmp/.X11-unix/X{display.lstrip(':')}"
