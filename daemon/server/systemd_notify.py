"""sd_notify over $NOTIFY_SOCKET: READY, WATCHDOG, STOPPING and STATUS.

Written against the stdlib instead of the ``sdnotify`` package because that
package (0.3.2) connects once at start-up (a systemd re-exec leaves it talking
to a dead socket), encodes as Latin-1 (a non-ASCII STATUS is silently dropped)
and hides every error behind a bare ``except``. The protocol is one datagram
per message; this is the whole of it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping

__all__ = ()

log = logging.getLogger("cud.systemd_notify")  # not "cud.notify": that reads as the [[notify]] hooks


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        address = env.get("NOTIFY_SOCKET", "")
        # Abstract sockets are written "@name"; the kernel wants a leading NUL.
        self.address: str | None = "\0" + address[1:] if address.startswith("@") else (address or None)
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or (pid.isdigit() and int(pid) == os.getpid())
        self.watchdog_interval = int(usec) / 2 / 1e6 if usec.isdigit() and int(usec) > 0 and mine else None

    def send(self, *fields: str) -> None:
        if self.address is None:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            try:
                sock.sendto("\n".join(fields).encode(), self.address)
            except OSError as exc:  # systemd gone or restarting: not a reason to stop working
                log.warning("sd_notify %s failed: %s", fields[0].split("=")[0], exc)

    def ready(self, status: str) -> None:
        self.send("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def stopping(self, status: str) -> None:
        self.send("STOPPING=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.send(f"STATUS={status}")

    async def watchdog(self) -> None:
        """Ping at half the watchdog interval for as long as the event loop runs this task."""
        if self.watchdog_interval is None:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_interval)
