"""The one Twisted reactor thread every VNC connection of a process shares, and how callers reach it.

Twisted's reactor runs in one daemon thread, started once per process (or
borrowed if something else already runs it) and never restarted: a stopped
reactor cannot be run again. A caller hands it a closure (``submit``) and
waits on a ``concurrent.futures.Future`` of its own, with a timeout; the
closure completes that future (``resolve``), now or later, and nothing else.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from twisted.internet import reactor as _installed

from cud.errors import DisplayUnavailable, DriverTimeout

__all__ = ("ensure_reactor", "reactor", "resolve", "submit")

#: The process's one reactor. Twisted types this module as its interfaces' unbound methods, not as the
#: installed reactor (callLater's first argument comes out as ``self``), so the drivers use it as Any.
reactor: Any = _installed

_lock = threading.Lock()
_thread: threading.Thread | None = None
_started = threading.Event()


def ensure_reactor(timeout: float) -> None:
    """Run the reactor on a daemon thread, once per process; reuse one already running."""
    global _thread
    with _lock:
        if _thread is None:
            if reactor.running:  # someone else's (vncdotool.api, a Twisted application)
                return
            if getattr(reactor, "_startedBefore", False):
                raise DisplayUnavailable(
                    "the Twisted reactor of this process has been stopped (vncdotool.api.shutdown()?) "
                    "and cannot be restarted")
            reactor.callWhenRunning(_started.set)
            _thread = threading.Thread(target=reactor.run, kwargs={"installSignalHandlers": False},
                                       name="cud-vnc-reactor", daemon=True)
            _thread.start()
            atexit.register(_stop_reactor)
    if not _started.wait(timeout):
        raise DriverTimeout(f"the Twisted reactor did not start within {timeout}s", timeout=timeout)
    if not reactor.running:
        raise DisplayUnavailable("the Twisted reactor of this process has been stopped and cannot be restarted")


def _stop_reactor() -> None:
    """At exit: close connections cleanly, but never wait long for it."""
    if _thread is not None and reactor.running:
        reactor.callFromThread(reactor.stop)
        _thread.join(1.0)


def resolve(future: Future[Any], value: Any = None, error: BaseException | None = None) -> None:
    """Complete ``future`` unless it already is (a caller that gave up is simply not told)."""
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)
    except InvalidStateError:
        pass


def submit(fn: Callable[[Future[Any]], None]) -> Future[Any]:
    """Run ``fn(future)`` on the reactor thread; ``fn`` completes the future, now or later."""
    future: Future[Any] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            fn(future)
        except BaseException as exc:  # handed to the waiting caller
            resolve(future, error=exc)

    reactor.callFromThread(run)
    return future
