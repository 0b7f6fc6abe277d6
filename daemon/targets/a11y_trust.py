"""Which accessibility bus address a seat's ``org.a11y.Bus`` owner may send the daemon (root) to.

The daemon finds a seat's accessibility bus as applications do: it asks the owner of
``org.a11y.Bus`` on the seat's session bus for ``GetAddress`` and connects there. The
seat's user can join that session bus, and where its policy lets the user own the name
(or the launcher is the user's own), the answer is the user's to give: the address of
another seat's accessibility bus (which admits root) would have this seat's targets and
element checks read another seat's applications, and any socket would have root talk
D-Bus to whatever listens there.

The rule, in :func:`connect_a11y_bus`:

* an owner that is not the seat's user (cud-bus@'s launcher as ``cud-display``, the
  sandbox's or the tests' as their own user, root) is a launcher the seat cannot signal
  or replace: its address is used as given;
* an owner that is the seat's user (a launcher it runs, or any program of its that
  claimed the name) may only name a Unix socket under a directory of this seat's (the
  session's runtime directory, the home's ``.cache/at-spi``), and the process listening
  there (``SO_PEERCRED`` of the very connection the daemon then uses) must be the seat's
  user: such a bus is the user's in any case, but never another seat's or another user's.

A refused address is an :class:`~cud.errors.AccessibilityError` naming the seat, the
address and why: a target is then not named, and an element check "could not look".
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dbus_fast import InvalidAddressError
from dbus_fast._private.address import parse_address
from dbus_fast.aio import MessageBus

from cud.errors import AccessibilityError

__all__ = ("SeatTrust", "connect_a11y_bus")

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class SeatTrust:
    """The seat an accessibility bus is looked up for: its name, its user's uid, and its own directories."""

    seat: str
    uid: int
    #: The directories (absolute) a bus of the seat's user may listen under; asked at each connect,
    #: since the session's runtime directory is made when first used.
    dirs: Callable[[], list[Path]]


def _refuse(trust: SeatTrust, address: str, owner_uid: int | None, why: str) -> AccessibilityError:
    owner = "of unknown uid" if owner_uid is None else f"uid {owner_uid}, the seat's user"
    return AccessibilityError(
        f"seat {trust.seat!r}: the accessibility bus address {address!r} given by the owner of org.a11y.Bus "
        f"({owner}) is refused: {why}", seat=trust.seat, bus=address)


def _socket_path(trust: SeatTrust, address: str, owner_uid: int | None) -> str:
    """The one Unix socket path ``address`` names, if it lies under one of the seat's directories."""
    try:
        transports = parse_address(address)
    except InvalidAddressError as exc:
        raise _refuse(trust, address, owner_uid, f"it is not a D-Bus address ({exc})") from None
    if len(transports) != 1 or transports[0][0] != "unix" or set(transports[0][1]) - {"path", "guid"} \
            or "path" not in transports[0][1]:
        raise _refuse(trust, address, owner_uid, "only one unix:path= socket may be named")
    path = transports[0][1]["path"]
    normal = os.path.normpath(path)
    if not os.path.isabs(path) or normal != path.rstrip("/"):
        raise _refuse(trust, address, owner_uid, "the socket path is not absolute and plain")
    dirs = trust.dirs()
    if not any(Path(normal).is_relative_to(d) and Path(normal) != d for d in dirs):
        raise _refuse(trust, address, owner_uid, "the socket is not under a directory of this seat's ("
                      + ", ".join(repr(str(d)) for d in dirs) + ")")
    return path


def _listener_uid(bus: MessageBus) -> int | None:
    """The uid of the process listening at the other end of ``bus``'s connection (SO_PEERCRED)."""
    sock: socket.socket | None = getattr(bus, "_sock", None)
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return int(uid)


async def connect_a11y_bus(trust: SeatTrust | None, address: str, owner_uid: int | None) -> MessageBus:
    """A connection to the accessibility bus at ``address``, which the owner of org.a11y.Bus (``owner_uid``)
    gave; AccessibilityError if the rule above refuses it or the bus cannot be reached. ``trust`` None: a bus
    of no seat user's (the daemon's own session), used as given."""
    # An owner whose uid the bus did not tell is confined like the seat's user.
    confine = trust is not None and (owner_uid is None or owner_uid == trust.uid)
    if confine:
        assert trust is not None
        _socket_path(trust, address, owner_uid)
    try:
        bus = await MessageBus(bus_address=address).connect()
    except (OSError, ValueError, EOFError, InvalidAddressError) as exc:
        raise AccessibilityError(f"the accessibility bus {address!r} cannot be reached: {exc}", bus=address) from None
    if confine:
        assert trust is not None
        # Checked on the connection used, not on a path looked at before: the user may swap what is there.
        listener = _listener_uid(bus)
        if listener != trust.uid:
            bus.disconnect()
            raise _refuse(trust, address, owner_uid, f"the process listening there is uid {listener}, "
                          f"not the seat's user (uid {trust.uid})")
    return bus
