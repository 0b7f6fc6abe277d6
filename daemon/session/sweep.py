"""Ending every process of a seat's session, whatever detached itself, and whatever names it owns on a bus.

The seat's user belongs to the seat, so "the session" is every process of that
uid (real or effective): what setsid, nohup or a double fork detached is still
the user's, and so is what D-Bus activation started on a bus the user runs. No
process of the user's is spared, for a name it owns on a bus or for listening at
the seat's bus address: the user may claim any name (``org.a11y.Bus`` included),
so the accessibility launcher the daemon reads targets through ends too when it
is the user's, and the reset starts it again (:mod:`cud.daemon.session.a11y`);
and a bus daemon of the user's is the user's program like any other (the user may
end it and listen at its address itself), so it ends too, and the reset then
fails naming it (:func:`cud.daemon.session.reset`): a seat's session bus must be
run by another user. One process alone is spared (:func:`spared`): the seat's
session bus daemon, the one the kernel says listens at the seat's bus address,
when it is *not* a process of the session.

Ending is freeze, then kill: every process found is sent SIGSTOP, and /proc is
read again until a pass finds nothing new (a stopped process cannot fork, so
this ends even under a fork bomb); then SIGKILL to all, and /proc is read until
none is left. A daemon that runs as the seat's user itself ends only processes
carrying the session's mark (``CUD_SEAT=<seat>`` in their environment, inherited
through every fork), never itself or the rest of its user's desktop.

What activation started on a bus of *another* user (a bus root runs with
service files, cud-bus@'s) runs as that user, and not as the bus daemon's child
(dbus-daemon's services are reparented): it is found by the bus address dbus-daemon
puts in every service's environment (``DBUS_STARTER_ADDRESS``) and ended too, with
what it started, but for the accessibility launcher there (cud-bus@'s), which is
not the seat user's either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import time

from cud.daemon.session.a11y import name_owner
from cud.daemon.session.bus_address import bus_socket
from cud.errors import SessionError

__all__ = ("SEAT_MARK", "bus_daemon", "bus_of_session", "end_processes", "session_pids", "spared")

#: The mark every process started in a session carries in its environment.
SEAT_MARK = "CUD_SEAT"
_POLL = 0.005


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _status(pid: str) -> tuple[int, int, str, int] | None:
    """(real uid, effective uid, state letter, parent pid) of ``pid``; None if it is gone."""
    raw = _read(f"/proc/{pid}/stat")
    status = _read(f"/proc/{pid}/status")
    if raw is None or status is None:
        return None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
    fields = raw.rsplit(b")", 1)[1].split()
    for line in status.splitlines():
        if line.startswith(b"Uid:"):
            uids = line.split()[1:3]
            return int(uids[0]), int(uids[1]), fields[0].decode(), int(fields[1])
    return None


def _started(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), which tells it from a later process given the same pid."""
    raw = _read(f"/proc/{pid}/stat")
    return None if raw is None else int(raw.rsplit(b")", 1)[1].split()[19])


def _processes() -> dict[int, tuple[int, int, str, int]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (status := _status(entry)) is not None:
            found[int(entry)] = status
    return found


def _descendants(roots: list[int], table: dict[int, tuple[int, int, str, int]]) -> set[int]:
    """``roots`` and every process below them."""
    children: dict[int, list[int]] = {}
    for pid, (_ruid, _euid, _state, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, ()))
    return out


def _marked(pid: int, mark: bytes | None) -> bool:
    return mark is None or mark in (_read(f"/proc/{pid}/environ") or b"").split(b"\0")


def session_pids(uid: int, mark: bytes | None = None, spare: frozenset[int] = frozenset()) -> list[int]:
    """Live processes (zombies are already dead) of ``uid`` (with ``mark`` in their environment, if given)."""
    me = os.getpid()
    found = []
    for pid, (ruid, euid, state, _ppid) in _processes().items():
        if pid == me or pid in spare or uid not in (ruid, euid) or state in ("Z", "X"):
            continue
        if not _marked(pid, mark):
            continue
        found.append(pid)
    return found


def _listener(address: str) -> tuple[int, int] | None:
    """(pid, uid) of the process listening at the bus address, as the kernel tells it (SO_PEERCRED), or None.

    The kernel's word, not the bus's: a program of the user's listening at that address could answer
    a question over the bus with any pid it liked.
    """
    where = bus_socket(address)
    if where is None:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(2)
        try:
            conn.connect(where)
            raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return None
    pid, uid, _gid = struct.unpack("3i", raw)
    return (pid, uid) if pid > 0 else None


async def bus_daemon(session_bus: str | None) -> tuple[int, int] | None:
    """(pid, uid) of the seat's session bus daemon: the process the kernel names as listening at ``session_bus``
    (SO_PEERCRED); None if there is no bus or nobody listens there."""
    if session_bus is None:
        return None
    return await asyncio.to_thread(_listener, session_bus)


def bus_of_session(bus: tuple[int, int], uid: int, mark: bytes | None) -> bool:
    """Whether the bus daemon ``bus`` (:func:`bus_daemon`) is a process of the session: the kernel says a process
    of ``uid`` listens (SO_PEERCRED), or that pid's real or effective uid is ``uid`` now (a bus that dropped to the
    user after it bound its socket); for a daemon running as the seat's user itself, it carries the ``mark`` too."""
    pid, listening_uid = bus
    status = _status(str(pid))
    if status is None:  # gone since: the kernel's word alone
        return listening_uid == uid and mark is None
    return uid in (listening_uid, status[0], status[1]) and _marked(pid, mark)


def spared(bus: tuple[int, int] | None, uid: int, mark: bytes | None) -> frozenset[int]:
    """What the sweep spares: the bus daemon ``bus`` (:func:`bus_daemon`) alone, and only when it is there and not
    a process of the session (:func:`bus_of_session`); nothing else (none of its children, nothing for a name it
    owns on the bus)."""
    if bus is None or _status(str(bus[0])) is None or bus_of_session(bus, uid, mark):
        return frozenset()
    return frozenset({bus[0]})


def _activated(uid: int, session_bus: str, bus: tuple[int, int],
               table: dict[int, tuple[int, int, str, int]]) -> list[int]:
    """What D-Bus activation started on the bus ``bus`` of another user, and what that started: processes of
    the bus's user whose environment names the bus (dbus-daemon gives every service it starts
    ``DBUS_STARTER_ADDRESS``; the services are not its children, they are reparented), with every process below
    them that is not the seat user's (those end with the rest)."""
    where = bus_socket(session_bus)
    status = table.get(bus[0])
    owners = {bus[1], *(status[:2] if status is not None else ())}
    me, roots = os.getpid(), []
    for pid, (ruid, _euid, state, _ppid) in table.items():
        if pid in (me, bus[0]) or ruid not in owners or ruid == uid or state in ("Z", "X"):
            continue
        for entry in (_read(f"/proc/{pid}/environ") or b"").split(b"\0"):
            if entry.startswith(b"DBUS_STARTER_ADDRESS="):
                address = entry.partition(b"=")[2].decode(errors="replace")
                if bus_socket(address) == where:
                    roots.append(pid)
                break
    return [pid for pid in _descendants(roots, table)
            if pid != me and pid != bus[0] and table[pid][0] != uid and table[pid][2] not in ("Z", "X")]


async def _end_activated(uid: int, seat: str, session_bus: str, bus: tuple[int, int], deadline: float) -> set[int]:
    """End what activation started on the bus of another user (:func:`_activated`), waiting until it is gone:
    all but the accessibility launcher there and its bus (cud-bus@ activates it), which the seat's user can
    neither signal nor make theirs (one of the seat's user's ends with the rest)."""
    table = _processes()
    foreign = _activated(uid, session_bus, bus, table)
    if not foreign:
        return set()
    owner = await name_owner(session_bus)
    if owner is not None and owner[1] != uid:
        keep = _descendants([owner[0]], table)
        foreign = [pid for pid in foreign if pid not in keep]
    # By pid and start time: a pid freed meanwhile and given to another process of another user is not signalled.
    started = {pid: when for pid in foreign if (when := _started(pid)) is not None}
    ended = set(started)
    while True:
        left = [pid for pid, when in started.items() if _started(pid) == when
                and (status := _status(str(pid))) is not None and status[2] not in ("Z", "X")]
        if not left:
            return ended
        if time.monotonic() > deadline:
            raise SessionError(f"seat {seat!r}: {len(left)} processes D-Bus activation started on {session_bus} "
                               f"did not end within the reset's time (pids {left[:10]})", seat=seat, pids=left[:10])
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(_POLL)


async def end_processes(uid: int, *, seat: str, session_bus: str | None, bus: tuple[int, int] | None,
                        marked: bool, timeout: float) -> tuple[int, frozenset[int]]:
    """End every process of the session (see the module's text): how many there were, and the pids spared
    (the bus daemon ``bus`` at ``session_bus``, :func:`bus_daemon`, if it is not the session's).

    SessionError, naming them, if some are still there at ``timeout``.
    """
    mark = f"{SEAT_MARK}={seat}".encode() if marked else None
    spare = spared(bus, uid, mark)
    deadline = time.monotonic() + timeout
    ended: set[int] = set()
    if bus is not None and bus[0] in spare and session_bus is not None:
        ended = await _end_activated(uid, seat, session_bus, bus, deadline)
    stopped: set[int] = set()
    while True:
        left = session_pids(uid, mark, spare)
        if not left:
            return len(ended | stopped), spare
        if time.monotonic() > deadline:
            raise SessionError(f"seat {seat!r}: {len(left)} processes of uid {uid} did not end within {timeout:g} s "
                               f"(pids {left[:10]})", seat=seat, pids=left[:10])
        fresh = [pid for pid in left if pid not in stopped]
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped.update(fresh)
        if fresh:
            await asyncio.sleep(0)
            continue  # read /proc again: what they forked before they stopped is found now
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(_POLL)
