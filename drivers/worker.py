"""A driver in a process of its own, one per seat.

Grabbing, waiting for the screen to settle and PNG encoding are most of a step's CPU. In the
daemon's process they all share one interpreter lock, so one daemon used about one core however
many seats it had. ``WorkerDriver`` runs the seat's real driver (:func:`cud.drivers.open_driver`)
in a child process and forwards each call over a socket; the daemon's thread for the seat
(:class:`cud.drivers.aio.AsyncDriver`) only waits on that socket.

Nothing about a driver's guarantees changes: the child runs the same driver code, so every action is
still checked whole before anything is sent, and errors come back as the same ``CudError``. What is
new is that the child can die (``kill -9``, out of memory). Then the call in flight raises
``DisplayUnavailable`` naming the worker, and the seat handles that as it handles a display that
went away. The next call starts a new worker, and its first act is ``release_all``: a worker
killed between a press and its release leaves that press held on the X server.

Workers are forked from one small fork server (:mod:`cud.drivers.forker`), so they share its copy
of Python and the X11 driver; the memory a seat adds is its frames and buffers.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Any

from cud.errors import DisplayUnavailable, DriverTimeout

from .base import Driver
from .forker import Forker

if TYPE_CHECKING:
    from openai.lib.computer import ComputerActionInput, Screenshot

__all__ = ("WorkerDriver",)

#: Seconds a worker may take beyond the driver's own bounds before it is taken for hung and killed. The
#: driver already cuts a display that does not answer within ``timeout`` (and settling within
#: ``settle_timeout``); this bound is for the worker process itself (stopped, deadlocked), so it is loose:
#: a long ``type`` is many round trips, each within the driver's bound.
WORKER_SLACK = 60.0
#: Seconds ``close`` waits for a worker to let go of the display and exit before killing it.
CLOSE_SECONDS = 10.0
#: One fork server for the whole daemon, started when the first seat needs a worker.
FORKER = Forker()


class WorkerDriver(Driver):
    """``open_driver(**options)`` run in a child process; the same calls, the same errors.

    Like every driver it is used from one thread (``AsyncDriver``'s). ``wait`` runs here: it only
    sleeps, and the SDK's cancel check cannot cross a process.
    """

    def __init__(self, **options: Any) -> None:
        self._options = options
        self.wait_seconds = float(options.get("wait_seconds", 1.0))
        self.display = options.get("vnc") or options.get("display") or os.environ.get("DISPLAY", "")
        self._bound = float(options.get("timeout", 10.0)) + float(options.get("settle_timeout", 1.0)) + WORKER_SLACK
        self._conn: Connection | None = None
        self._pid: int | None = None
        self._pidfd: int | None = None
        #: A worker ended: the next one first releases whatever the dead one may have left held.
        self._release_first = False

    @property
    def pid(self) -> int | None:
        """The worker's process id; None while no worker runs (none started yet, or it ended)."""
        return self._pid

    # -- the worker --------------------------------------------------------------
    def _start(self) -> Connection:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:  # only the worker keeps its end: its death is the end of the socket
            try:
                self._pid, self._pidfd = FORKER.fork(theirs)
            except OSError as exc:
                ours.close()
                raise DisplayUnavailable(f"no driver process could be started for {self.display}: {exc}",
                                         display=self.display) from exc
        self._conn = Connection(ours.detach())
        self._conn.send(self._options)
        return self._conn

    def _ended(self, why: str, error: type[DisplayUnavailable] = DisplayUnavailable) -> DisplayUnavailable:
        """Forget the worker (killing it if it still runs) and say what happened, naming it."""
        pid = self._pid
        self._drop()
        self._release_first = True
        return error(f"the driver process (pid {pid}) of {self.display} {why}", display=self.display, pid=pid)

    def _drop(self) -> None:
        """Close the socket and kill the worker, by its pidfd: never another process that took its pid."""
        conn, pidfd = self._conn, self._pidfd
        self._conn = self._pid = self._pidfd = None
        if conn is not None:
            conn.close()
        if pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            select.select([pidfd], [], [], CLOSE_SECONDS)  # a pidfd is readable once its process has exited
            os.close(pidfd)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self._conn is None:
            self._start()
        if self._release_first and name != "release_all":
            self._forward("release_all")
        return self._forward(name, *args, **kwargs)

    def _forward(self, name: str, *args: Any, **kwargs: Any) -> Any:
        conn, pidfd = self._conn, self._pidfd
        assert conn is not None and pidfd is not None
        try:
            conn.send((name, args, kwargs))
            ready = wait([conn, pidfd], self._bound)
            if conn not in ready:
                if not ready:
                    raise self._ended(f"gave no answer to {name} in {self._bound:g} s", DriverTimeout) from None
                raise self._ended(f"ended during {name}")
            ok, value = conn.recv()
        except (EOFError, OSError) as exc:  # a broken socket: the worker is gone
            raise self._ended(f"ended during {name}") from exc
        if ok and name == "release_all":
            self._release_first = False
        if ok:
            return value
        raise value

    # -- the Driver's calls, forwarded -------------------------------------------
    @property
    def screen_size(self) -> tuple[int, int]:
        return tuple(self._call("screen_size"))

    def _act(self, action: ComputerActionInput) -> object:
        return self._call("_act", _plain(action))

    def screenshot(self) -> Screenshot:
        return self._call("screenshot")  # type: ignore[no-any-return]

    def peek(self) -> Screenshot:
        return self._call("peek")  # type: ignore[no-any-return]

    def probe(self) -> tuple[int, int]:
        return tuple(self._call("probe"))

    def rest(self) -> None:
        if self._conn is not None:  # a worker not running has nothing to let go of
            self._call("rest")

    def release_all(self) -> None:
        self._call("release_all")

    def target_patch(self, x: int, y: int, radius: int, *, from_last_screenshot: bool) -> bytes:
        return self._call("target_patch", x, y, radius,  # type: ignore[no-any-return]
                          from_last_screenshot=from_last_screenshot)

    def fingerprint(self) -> Any:
        return self._call("fingerprint")

    def screenshot_and_fingerprint(self) -> tuple[Screenshot, Any]:
        shot, prints = self._call("screenshot_and_fingerprint")
        return shot, prints

    def close(self) -> None:
        """Ask the worker to close its driver (it releases what it holds) and exit; kill it if it has not."""
        conn, pidfd = self._conn, self._pidfd
        if conn is None or pidfd is None:
            return
        with contextlib.suppress(EOFError, OSError):
            conn.send(None)
            select.select([pidfd], [], [], CLOSE_SECONDS)
        self._drop()


def _plain(value: Any) -> Any:
    """``value`` with every pydantic model in it (the SDK's actions are) as a dict: unpickling a model would
    import the openai package into the driver process, which then costs as much memory as the daemon."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value

