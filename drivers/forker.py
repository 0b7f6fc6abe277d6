"""The seats' driver processes (:mod:`cud.drivers.worker`): the fork server that starts them, and their loop.

The daemon's own process has threads, so forking it could copy a lock some thread held; starting
a fresh interpreter for each seat would cost each seat its own copy of Python and the X11 driver.
So the daemon starts this one small process (``python -m cud.drivers.forker``, single-threaded,
the X11 driver imported once), and every worker is forked from it and shares those pages.

multiprocessing's own fork server was not used: before running a child it re-imports the parent's
``__main__`` (for the daemon, its whole command-line module) in every child.

The protocol, on a Unix socket pair: the daemon sends one byte and one end of a new socket pair;
the server forks a worker that serves that end, and answers with the worker's pid (4 bytes) and a
pidfd for it, so the daemon can wait for and kill exactly that process even once its pid is reused.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from multiprocessing.connection import Connection

from cud import heap
from cud.errors import DriverError

__all__ = ("Forker",)

_PID = struct.Struct("=i")
#: What the fork server imports before it forks anything: the X11 driver and what it imports only once it
#: connects, grabs or fingerprints. A module a worker imports itself is its own copy, which every seat then
#: pays for (tests/test_driver_worker.py checks that a worker that has worked maps no library the server
#: did not). A VNC seat's worker imports Twisted itself, so machines with X11 seats only never load it.
PRELOAD = ("cud.drivers.x11", "Xlib.support.unix_connect", "Xlib.xauth", "mss.linux.xshmgetimage", "mss.linux.xlib",
           "numpy.random", "secrets")
#: What a worker answers: the driver's methods and its screen size, nothing else of the object.
_CALLS = frozenset({"_act", "screenshot", "peek", "probe", "rest", "release_all", "target_patch",
                    "fingerprint", "screenshot_and_fingerprint", "screen_size"})


class Forker:
    """The daemon's handle on the fork server: started on first use, shared by every seat's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def fork(self, conn: socket.socket) -> tuple[int, int]:
        """A new worker serving ``conn`` (the caller closes its copy): its pid and a pidfd for it."""
        with self._lock:
            for _attempt in (1, 2):  # a server that died (killed by hand) is started again, once
                sock = self._sock if self._sock is not None and self._alive() else self._start()
                try:
                    socket.send_fds(sock, [b"w"], [conn.fileno()])
                    reply, fds, _flags, _addr = socket.recv_fds(sock, _PID.size, 1)
                except OSError:
                    reply, fds = b"", []
                if len(reply) == _PID.size and len(fds) == 1:
                    return _PID.unpack(reply)[0], fds[0]
                for fd in fds:
                    os.close(fd)
                self._stop()
            raise OSError(f"the driver fork server ({sys.executable} -m cud.drivers.forker) gave no worker")

    def _alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _start(self) -> socket.socket:
        self._stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # glibc, for the server and its workers: one malloc arena (with one per thread, each thread's arena
        # kept ~4 MiB of a finished task that cud.heap.trim could not give back), and a fixed mmap threshold
        # (glibc raises it after the first frame is freed, and later frames then stay in the heap). Measured:
        # a worker at rest held 16 MiB private before, 10 after (the seats bench's numbers: benchmarks.md).
        with theirs:
            self._process = subprocess.Popen([sys.executable, "-m", "cud.drivers.forker", str(theirs.fileno())],
                                             pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                             env={**os.environ, "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": "131072"})
        self._sock = ours
        atexit.register(self.close)  # a process that never closes it (a test, a script) still stops the server
        return ours

    def _stop(self) -> None:
        if self._sock is not None:
            self._sock.close()  # the server sees the end of its socket and exits
            self._sock = None
        if self._process is not None:
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def close(self) -> None:
        with self._lock:
            self._stop()


def _reap(_signum: int, _frame: object) -> None:
    # Workers are reaped here, so none stays a zombie; the daemon learns of a death from its pipe and pidfd.
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(fd: int) -> None:
    for name in PRELOAD:  # imported once here, shared by every worker forked after
        importlib.import_module(name)
    from mss.linux import xcb

    xcb.initialize()  # the XCB libraries mss loads on its first connection, loaded here instead

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the daemon, which stops us in order
    signal.signal(signal.SIGCHLD, _reap)
    sock = socket.socket(fileno=fd)
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, 1, 1)
        if not message:
            return  # the daemon is gone
        if len(fds) != 1:
            for stray in fds:
                os.close(stray)
            continue
        # SIGCHLD waits until the pidfd is open: a worker that ended at once must not be reaped (and its pid
        # perhaps reused) before then.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        # Objects the server made stay out of the children's garbage collections, which would otherwise
        # write to (and so copy) every page of the heap they share with it.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            sock.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            code = 0
            try:
                serve(socket.socket(fileno=fds[0]))
            except BaseException:  # a worker never returns into the server's loop; the daemon's log gets why
                traceback.print_exc()
                code = 1
            os._exit(code)
        os.close(fds[0])
        try:
            pidfd = os.pidfd_open(pid)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        try:
            socket.send_fds(sock, [_PID.pack(pid)], [pidfd])
        finally:
            os.close(pidfd)


def serve(sock: socket.socket) -> None:
    """The worker, forked by the fork server: read the driver's options, then run each call on the
    driver and send back ``(True, result)`` or ``(False, error)``, until the daemon sends ``None``
    or its end of the socket closes (the daemon is gone)."""
    from cud.drivers import open_driver
    from cud.drivers.png import PngSettings

    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:  # what ps and top show
        comm.write("cud-driver")
    conn = Connection(sock.detach())
    try:
        options = conn.recv()
    except (EOFError, OSError):
        return
    # One thread encodes: the seats' processes already spread over the cores, and a pool per process would
    # only add a hand-over per band (and its threads' buffers) to every seat.
    driver = open_driver(**options, png=PngSettings(threads=1))
    try:
        while True:
            try:
                call = conn.recv()
            except (EOFError, OSError):
                return
            if call is None:
                return
            name, args, kwargs = call
            try:
                if name not in _CALLS:
                    raise DriverError(f"a driver worker has no call {name!r}", call=name)
                value = getattr(driver, name)
                reply = (True, value(*args, **kwargs) if callable(value) else value)
                if name == "rest":  # the task is over: its frames' memory goes back (cud.heap)
                    heap.trim()
            except Exception as exc:  # (every error goes back to the caller, as it would in-process)
                reply = (False, exc)
            try:
                conn.send(reply)
            except Exception as exc:  # (an error that does not pickle still gets its words across)
                conn.send((False, DriverError(f"{type(exc).__name__} in the driver worker: {exc}")))
    finally:
        driver.close()


if __name__ == "__main__":
    main(int(sys.argv[1]))
