"""The console's way to the daemon: one socket request at a time, on the event loop.

The same protocol and the same errors as :class:`cud.cuctl.client.Client`
(requests are built and checked by :func:`cud.protocol.request`, replies by
:func:`cud.protocol.parse_message`; a daemon's refusal is a
:class:`~cud.cuctl.client.RemoteError` with the daemon's kind and message), but
asynchronous, so a ``follow`` that waits hours for a person costs the server
no thread. Every call opens its own connection: the daemon sees the console's
user (``SO_PEERCRED``) on each of them and decides each request by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cud.cuctl.client import ConnectionFailed, parse_reply, result_of
from cud.errors import ProtocolError
from cud.protocol import (
    MAX_MESSAGE_BYTES,
    DaemonMessage,
    encode,
    request,
)

__all__ = ("Link",)

Stream = Callable[[DaemonMessage], None]


class Link:
    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout

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
            raise ConnectionFailed(f"the daemon at {str(self.path)!r} did not answer a {kind!r} request "
                                   f"within {self.timeout:g} s") from None

    async def _exchange(self, kind: str, message: bytes, on_stream: Stream | None) -> Any:
        try:
            reader, writer = await asyncio.open_unix_connection(str(self.path), limit=MAX_MESSAGE_BYTES + 1)
        except OSError as exc:
            raise ConnectionFailed(f"cannot connect to the daemon at {str(self.path)!r}: {exc.strerror or exc}",
                                   path=str(self.path)) from None
        try:
            try:
                writer.write(message)
                await writer.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # a refusing daemon answers and closes: its reason is in the read buffer
            while True:
                line = await self._line(reader)
                reply = parse_reply(line, self.path, "console")
                if "ok" in reply:
                    return result_of(reply)
                if on_stream is None:
                    raise ProtocolError(f"unexpected {reply.get('type')!r} message for a {kind!r} request")
                on_stream(reply)
        except OSError as exc:
            raise ConnectionFailed(f"lost the connection to {str(self.path)!r}: {exc.strerror or exc}") from None
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def _line(self, reader: asyncio.StreamReader) -> bytes:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                raise ProtocolError("the daemon sent a truncated message") from None
            raise ConnectionFailed(f"the daemon at {str(self.path)!r} closed the connection") from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("the daemon sent an oversized message") from None
        return line
