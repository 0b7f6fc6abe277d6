"""The seat's accessibility bus across a reset: a launcher of the seat's user ends with the rest, and starts again.

The daemon reads targets through at-spi2-core's accessibility bus, which the
launcher that owns ``org.a11y.Bus`` on the seat's session bus hands out. Where that
launcher runs as the seat's user (the sandbox's, a desktop session's), the reset
ends it like every process of the user: sparing whoever owns the name would spare
any program of the user's that claims it (the bus lets the user own it). So the
reset notes, before the sweep, whether the name's owner is the user's
(:meth:`A11yLauncher.note`), and once the session is clean starts a fresh launcher
in it as the user (:meth:`A11yLauncher.restore`), waiting until it owns the name.
A launcher the user cannot signal (cud-bus@'s, run by root) is never touched. Once
a seat had a launcher of its user's, every later reset starts one, even when the
user ended it before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import TYPE_CHECKING

from cud.daemon.session.bus_address import bus_socket
from cud.errors import SessionError

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("LAUNCHER", "A11yLauncher", "name_owner")

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
A11Y_NAME = "org.a11y.Bus"
_DBUS_SEND = "/usr/bin/dbus-send"
_POLL = 0.05


async def _send(address: str, dest: str, path: str, method: str, *args: str) -> str | None:
    """What the bus at ``address`` answers to ``method`` of ``dest`` (dbus-send's literal reply; None on an error or
    no answer within 5 s)."""
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            _DBUS_SEND, f"--bus={address}", "--print-reply=literal", "--reply-timeout=2000", f"--dest={dest}", path,
            method, *args, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        try:
            out, _err = await asyncio.wait_for(proc.communicate(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return None
        if proc.returncode == 0:
            return out.decode(errors="replace").strip()
    return None


async def _ask(address: str, method: str, name: str) -> int | None:
    """A number the bus at ``address`` answers about ``name`` (None if it has no owner or no answer)."""
    out = await _send(address, "org.freedesktop.DBus", "/org/freedesktop/DBus", f"org.freedesktop.DBus.{method}",
                      f"string:{name}")
    words = (out or "").split()
    return int(words[-1]) if words and words[-1].isdigit() else None


async def name_owner(address: str, name: str = A11Y_NAME) -> tuple[int, int] | None:
    """(pid, uid) of the owner of ``name`` on the bus at ``address``; None if nobody owns it (this starts nothing)."""
    pid, uid = await asyncio.gather(_ask(address, "GetConnectionUnixProcessID", name),
                                    _ask(address, "GetConnectionUnixUser", name))
    return None if pid is None or uid is None else (pid, uid)


async def bus_socket_of_another(address: str, uid: int) -> str | None:
    """The socket path of the accessibility bus at the seat's session bus ``address``, when a launcher of another
    user than ``uid`` owns ``org.a11y.Bus`` (the sandbox's, cud-bus@'s): a session with private temp directories
    must have it bound in if it lies under one. None without such a launcher (nothing is activated: the name's
    owner is asked first), or with a launcher of the seat's user (it runs in the session and puts its socket in
    the session's runtime directory)."""
    owner = await name_owner(address)
    if owner is None or owner[1] == uid:
        return None
    given = await _send(address, A11Y_NAME, "/org/a11y/bus", f"{A11Y_NAME}.GetAddress")
    path = None if given is None else bus_socket(given)
    return path if isinstance(path, str) else None  # an abstract socket is not a file: nothing to bind


class A11yLauncher:
    """Whether a seat's session has an accessibility launcher of its user's to start again after a reset."""

    def __init__(self) -> None:
        self.wanted = False

    async def note(self, session: SeatSession) -> None:
        """Before the sweep: a launcher of the seat's user there now is one to start again afterwards."""
        address = session.places.session_bus
        if address is None or self.wanted:
            return
        owner = await name_owner(address)
        if owner is not None and owner[1] == session.account.uid:
            self.wanted = True

    async def restore(self, session: SeatSession, timeout: float) -> bool:
        """After the reset: a fresh launcher of the user's owns ``org.a11y.Bus`` (started if wanted and no one
        does). True if one was started; SessionError if it does not own the name within ``timeout``."""
        address = session.places.session_bus
        if address is None or not self.wanted or await name_owner(address) is not None:
            return False
        if not os.access(LAUNCHER, os.X_OK):
            raise SessionError(f"seat {session.seat!r}: the accessibility launcher {LAUNCHER!r} is not there to "
                               "start again", seat=session.seat, path=LAUNCHER)
        await session.launch([LAUNCHER, "--launch-immediately"])
        deadline = time.monotonic() + timeout
        while (owner := await name_owner(address)) is None or owner[1] != session.account.uid:
            if time.monotonic() > deadline:
                raise SessionError(f"seat {session.seat!r}: the accessibility launcher started again did not own "
                                   f"{A11Y_NAME} on {address} within {timeout:g} s", seat=session.seat)
            await asyncio.sleep(_POLL)
        return True
