"""The console's way to the daemon: socket requests on the event loop, over a few reused connections.

The same protocol and the same errors as :class:`cud.cuctl.client.Client`
(requests are built and checked by :func:`cud.protocol.request`, replies by
:func:`cud.protocol.parse_message`; a daemon's refusal is a
:class:`~cud.cuctl.client.RemoteError` with the daemon's kind and message), but
asynchronous, so a ``follow`` that waits hours for a person costs the server
no thread. The daemon decides each request by itself from the connection's
peer (``SO_PEERCRED``: the console's user, or the ssh login user behind
``--host``).

A connection that answered is kept for the next request, up to ``KEEP`` of
them for ``KEEP_SECONDS``: the page asks for the state and the screens every
second, and over ssh each new connection is an ssh session and a remote
``cuctl`` start. One that was cut, timed out or cancelled mid-request is
closed, never reused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cud.cuctl.client import parse_reply, result_of
from cud.cuctl.dial import Connection, Dialer, UnixDialer
from cud.errors import ConnectionFailed, ProtocolError
from cud.protocol import MAX_MESSAGE_BYTES, DaemonMessage, encode, request

__all__ = ("Link",)

Stream = Callable[[DaemonMessage], None]

#: Idle connections kept, and for how long: well under the daemon's 30 s idle limit, so
#: a kept connection is not one the daemon is about to drop.
KEEP = 6
KEEP_SECONDS = 10.0


@dataclass(eq=False)
class _Open:
    conn: Connection
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = field(default_factory=time.monotonic)


class Link:
    def __init__(self, where: Path | Dialer, timeout: float = 30.0) -> None:
        self.dialer: Dialer = UnixDialer(where) if isinstance(where, Path) else where
        self.where = self.dialer.where
        self.timeout = timeout
        self._idle: list[_Open] = []
        self._closing: set[asyncio.Task[None]] = set()  # stale connections being closed

    async def call(self, kind: str, on_stream: Stream | None = None, *, wait_forever: bool = False,
                   **fields: Any) -> Any:
        """Send one request; feed streamed messages to ``on_stream``; return the result or raise RemoteError.

        ``wait_forever`` lifts the deadline (``follow`` waits for the task to end);
        otherwise the whole exchange must be over within ``timeout`` seconds.
        """
        message = encode(request(kind, **fields))  # a bad field is a ProtocolError here, before connecting
        if wait_forever:
            return await self._exchange(kind, message, on_stream)
        try:
            return await asyncio.wait_for(self._exchange(kind, message, on_stream), self.timeout)
        except TimeoutError:
            raise ConnectionFailed(f"the daemon at {self.where} did not answer a {kind!r} request "
                                   f"within {self.timeout:g} s") from None

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        await asyncio.gather(*(self._discard(link) for link in idle), *self._closing)

    async def _exchange(self, kind: str, message: bytes, on_stream: Stream | None) -> Any:
        link = self._take() or await self._open()
        reusable = False
        try:
            try:
                link.writer.write(message)
                await link.writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # a refusing daemon answers and closes: its reason is in the read buffer
            while True:
                reply = parse_reply(await self._line(link), self.where, "console")
                if "ok" in reply:
                    reusable = True
                    return result_of(reply)
                if on_stream is None:
                    raise ProtocolError(f"unexpected {reply.get('type')!r} message for a {kind!r} request")
                on_stream(reply)
        except OSError as exc:
            raise await asyncio.to_thread(link.conn.lost, f"dropped the connection: {exc.strerror or exc}") from None
        finally:
            if reusable and len(self._idle) < KEEP:
                link.idle_since = time.monotonic()
                self._idle.append(link)
            else:
                # Shielded: a cancelled request (a page gone away) still closes its connection.
                await asyncio.shield(self._discard(link))

    def _take(self) -> _Open | None:
        """The most recently used idle connection that is still fresh and still open."""
        while self._idle:
            link = self._idle.pop()
            fresh = time.monotonic() - link.idle_since < KEEP_SECONDS
            if fresh and not link.reader.at_eof() and not link.writer.transport.is_closing():
                return link
            closing = asyncio.create_task(self._discard(link))  # not on this request's time
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        return None

    async def _open(self) -> _Open:
        conn = await asyncio.to_thread(self.dialer.dial)
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn.sock, limit=MAX_MESSAGE_BYTES + 1)
        except BaseException:
            await asyncio.to_thread(conn.close)
            raise
        return _Open(conn, reader, writer)

    async def _discard(self, link: _Open) -> None:
        link.writer.close()
        try:
            await link.writer.wait_closed()
        except OSError:
            pass
        await asyncio.to_thread(link.conn.close)  # over ssh: waits for ssh to end

    async def _line(self, link: _Open) -> bytes:
        try:
            return await link.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise ProtocolError("the daemon sent a truncated message") from None
            raise await asyncio.to_thread(link.conn.lost, "closed the connection") from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("the daemon sent an oversized message") from None
