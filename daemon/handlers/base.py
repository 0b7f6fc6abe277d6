"""What every handler receives: the daemon's parts, the peer, and a way to stream messages."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cud.daemon.access import Peer
    from cud.daemon.service import Daemon

__all__ = ()


@dataclasses.dataclass
class Context:
    daemon: Daemon
    peer: Peer
    #: Send one streamed message (event or chunk) before the reply.
    send: Callable[[dict[str, Any]], Awaitable[None]]
