"""dbus-fast's writer, made to wait when the socket is full instead of dropping the connection.

dbus-fast (5.2.0, as python-dbus-next before it: its issues #153/#154) sends from
``_MessageWriter.write_callback`` on a non-blocking socket and treats every exception as
the connection's end, ``BlockingIOError`` (EAGAIN) included. A burst of calls while the
bus daemon is slow to read (a loaded machine: the accessibility bus's dbus-daemon gets no
CPU for a moment) fills the socket's buffer, the send raises EAGAIN, and the whole
connection is finalized: every later lookup and element check failed with "the
accessibility bus connection was lost: [Errno 9] Bad file descriptor", a red verdict
that meant only that cud could not look.

EAGAIN and EINTR here mean "not now": the writer keeps its place in the message
(``buf``/``offset``) and waits for the socket to be writable again, as the loop's writer
callback it registers. Any other error still ends the connection, as upstream does.

Two more of upstream's ways to fail a call wrongly once the connection has ended are mended
in ``schedule_write``. After a send failed and ended the connection, upstream registers the
closed socket's writer with the loop, which raises ``[Errno 9] Bad file descriptor`` out of
``MessageBus.call`` (the message the issue saw) and leaves the call's reply future failed
with no one awaiting it (logged as "Future exception was never retrieved" with the writer's
traceback); and a call made on a connection that has already ended registers its reply
handler after ``_finalize`` answered them all, so it waits for ever. Here nothing is sent
or registered once the connection has ended, and what is queued and waiting fails at once
with ``BrokenPipeError``, which the caller (:mod:`cud.daemon.targets.atspi`) reports as a
lost connection. A send's own future, which no caller of ``call`` awaits, is marked seen
when it fails.

The patch replaces the writer class dbus-fast's ``MessageBus.connect`` builds (it looks the
name up in its module at each connect), once, when the targets room loads it (``atspi.py``
imports it; the daemon loads that at start), so every bus the daemon opens after gets it.
``write_callback`` is upstream's with the one ``except`` added, so the version is pinned below 6 in pyproject.toml and
``tests/test_dbus_writes.py`` fails if the shape it relies on changes.
"""

from __future__ import annotations

import array
import asyncio
import errno
import socket
from collections.abc import Callable
from typing import Any, cast

from dbus_fast import Message
from dbus_fast.aio import message_bus as _upstream

__all__ = ("PatientWriter",)

# dbus-fast's helpers check for a None future themselves; their annotations say it may not be one.
_future_set_result = cast(Callable[["asyncio.Future[Any] | None", Any], None], _upstream._future_set_result)
_future_set_exception = cast(Callable[["asyncio.Future[Any] | None", Exception], None],
                             _upstream._future_set_exception)


class PatientWriter(_upstream._MessageWriter):
    """dbus-fast's writer, but a full socket is waited out instead of ending the connection."""

    def write_callback(self, remove_writer: bool = True) -> None:
        # Made for a connected bus: upstream's writer reads both without a check, as this one does.
        sock, fd = cast(socket.socket, self.sock), cast(int, self.fd)
        try:
            while True:
                if self.buf is None:
                    if not self.messages:
                        if remove_writer:
                            self.loop.remove_writer(fd)
                        return
                    buf, unix_fds, fut = self.messages.popleft()
                    self.unix_fds = unix_fds
                    self.buf = memoryview(buf)
                    self.offset = 0
                    self.fut = fut
                if self.unix_fds and self.negotiate_unix_fd:
                    ancdata = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", self.unix_fds))]
                    self.offset += sock.sendmsg([self.buf[self.offset:]], ancdata)
                    self.unix_fds = None
                else:
                    self.offset += sock.send(self.buf[self.offset:])
                if self.offset < len(self.buf):
                    return  # the rest when the socket is writable (the writer callback is registered)
                self.buf = None
                _future_set_result(self.fut, None)
        except (BlockingIOError, InterruptedError):
            # Nothing was sent of this piece: try again once the bus daemon has read.
            self.loop.add_writer(fd, self.write_callback)
        except Exception as exc:
            if self.bus._user_disconnect:
                _future_set_result(self.fut, None)
            else:
                _failed(self.fut, exc)
            self.bus._finalize(exc)

    def schedule_write(self, msg: Message | None = None, future: asyncio.Future[Any] | None = None) -> None:
        """Upstream's, but nothing is sent, nor a writer registered, once the connection has ended."""
        queue_is_empty = not self.messages
        if msg is not None:
            self.buffer_message(msg, future)
        if not self.bus._disconnected and self.bus.unique_name:
            if queue_is_empty:
                self._write_without_remove_writer()
            if not self.bus._disconnected and (self.buf is not None or self.messages or not self.fut
                                               or not self.fut.done()):
                self.loop.add_writer(cast(int, self.fd), self.write_callback)
        if self.bus._disconnected:
            self._ended()

    def _ended(self) -> None:
        """Fail what was queued on a connection that has ended, and the calls waiting on it.

        ``_finalize`` answers the calls waiting when the connection ends; a call made after
        (a look that had not yet seen it end) would otherwise wait for ever, its reply handler
        registered after they were answered, and its message never sent.
        """
        error = BrokenPipeError(errno.EPIPE, "the connection had ended")
        while self.messages:
            _failed(self.messages.popleft()[2], error)
        handlers = self.bus._method_return_handlers
        while handlers:
            handlers.pop(next(iter(handlers)))(None, error)


def _failed(future: asyncio.Future[Any] | None, error: Exception) -> None:
    """``future`` (a send's) fails with ``error``, marked seen: no one awaits a call's send future (its reply
    handler tells the caller), and asyncio would log it again when collected, "Future exception was never
    retrieved" with this traceback (what the daemon's log showed)."""
    _future_set_exception(future, error)
    if future is not None and future.done() and not future.cancelled():
        future.exception()


_upstream._MessageWriter = PatientWriter  # type: ignore[misc]  # the patch itself
