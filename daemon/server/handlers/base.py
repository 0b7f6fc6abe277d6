"""What every handler receives: the daemon's parts, the peer, and a way to stream messages."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from cud.errors import ProtocolError
from cud.protocol import CHUNK_BYTES, chunk_message

if TYPE_CHECKING:
    from cud.daemon.server.access import Peer
    from cud.daemon.service import Daemon

__all__ = ()


@dataclasses.dataclass
class Context:
    daemon: Daemon
    peer: Peer
    #: Send one streamed message (event or chunk) before the reply.
    send: Callable[[dict[str, Any]], Awaitable[None]]
    #: The bytes of the client's next ``chunk`` message (``put``, a spec's ``submit``: after the daemon said ``ready``).
    receive: Callable[[], Awaitable[bytes]]

    async def send_chunks(self, data: bytes) -> None:
        """``data`` as base64 ``chunk`` messages, each under the message cap (a screenshot, an image)."""
        for start in range(0, len(data), CHUNK_BYTES):
            await self.send(dict(chunk_message(base64.b64encode(data[start : start + CHUNK_BYTES]).decode())))

    async def receive_exactly(self, size: int, write: Callable[[bytes], Awaitable[None]], what: str) -> None:
        """The client's next ``chunk`` messages, ``size`` bytes in all, each given to ``write`` (``put``'s file, a
        spec's files); ProtocolError naming ``what`` when they do not add up to it. The one upload loop."""
        received = 0
        while received < size:
            chunk = await self.receive()
            if not chunk or received + len(chunk) > size:
                raise ProtocolError(f"the chunks for {what} do not add up to the {size} bytes announced",
                                    what=what, size=size)
            await write(chunk)
            received += len(chunk)
