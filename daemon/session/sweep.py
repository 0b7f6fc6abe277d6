"""Ending every process of a seat's session, whatever detached itself, and sparing the session's own buses.

The seat's user belongs to the seat, so "the session" is every process of that
uid (real or effective): what setsid, nohup or a double fork detached is still
the user's, and so is what D-Bus activation started on a bus the user runs. Only
the session's infrastructure is spared (:func:`infrastructure`): the seat's
session bus itself and the accessibility bus launcher that owns ``org.a11y.Bus``
there, with its children (the accessibility bus and its registry), so the
daemon can still read targets after a reset. The registry forgets every
application that ends.

Ending is freeze, then kill: every process found is sent SIGSTOP, and /proc is
read again until a pass finds nothing new (a stopped process cannot fork, so
this ends even under a fork bomb); then SIGKILL to all, and /proc is read until
none is left. A daemon that runs as the seat's user itself ends only processes
carrying the session's mark (``CUD_SEAT=<seat>`` in their environment, inherited
through every fork), never itself or the rest of its user's desktop.

What activation started on a bus of *another* user (a bus root runs with
service files) is found as that bus daemon's children and ended too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterable

from cud.errors import SessionError

__all__ = ("SEAT_MARK", "end_processes", "infrastructure", "session_pids")

#: The mark every process started in a session carries in its environment.
SEAT_MARK = "CUD_SEAT"
_POLL = 0.005
_DBUS_SEND = "/usr/bin/dbus-send"


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


def _processes() -> dict[int, tuple[int, int, str, int]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (status := _status(entry)) is not None:
            found[int(entry)] = status
    return found


def _descendants(roots: Iterable[int], table: dict[int, tuple[int, int, str, int]]) -> set[int]:
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


def session_pids(uid: int, mark: bytes | None = None, spare: frozenset[int] = frozenset()) -> list[int]:
    """Live processes (zombies are already dead) of ``uid`` (with ``mark`` in their environment, if given)."""
    me = os.getpid()
    found = []
    for pid, (ruid, euid, state, _ppid) in _processes().items():
        if pid == me or pid in spare or uid not in (ruid, euid) or state in ("Z", "X"):
            continue
        if mark is not None and mark not in (_read(f"/proc/{pid}/environ") or b"").split(b"\0"):
            continue
        found.append(pid)
    return found


async def _bus_pid_of(address: str, name: str) -> int | None:
    """The pid of the process owning ``name`` on the bus at ``address`` (dbus-send; None if it cannot tell)."""
    with contextlib.suppress(OSError):
        proc = await asyncio.create_subprocess_exec(
            _DBUS_SEND, f"--bus={address}", "--print-reply=literal", "--reply-timeout=2000",
            "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetConnectionUnixProcessID", f"string:{name}",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        try:
            out, _err = await asyncio.wait_for(proc.communicate(), 5)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return None
        words = out.split()
        if proc.returncode == 0 and words and words[-1].isdigit():
            return int(words[-1])
    return None


async def infrastructure(session_bus: str | None) -> tuple[int | None, frozenset[int]]:
    """The seat's bus daemon, and what is spared: it, and the accessibility launcher with its children."""
    if session_bus is None:
        return None, frozenset()
    bus, launcher = await asyncio.gather(_bus_pid_of(session_bus, "org.freedesktop.DBus"),
                                         _bus_pid_of(session_bus, "org.a11y.Bus"))
    spare = {bus} if bus is not None else set()
    if launcher is not None:
        spare |= _descendants([launcher], _processes())
    return bus, frozenset(spare)


async def end_processes(uid: int, *, seat: str, session_bus: str | None, marked: bool,
                        timeout: float) -> tuple[int, frozenset[int]]:
    """End every process of the session (see the module's text): how many there were, and the pids spared.

    SessionError, naming them, if some are still there at ``timeout``.
    """
    mark = f"{SEAT_MARK}={seat}".encode() if marked else None
    bus, spare = await infrastructure(session_bus)
    ended: set[int] = set()
    if bus is not None:  # what activation started there as another user: the bus daemon's children
        table = _processes()
        for pid, (ruid, _euid, state, ppid) in table.items():
            if ppid == bus and pid not in spare and ruid != uid and state not in ("Z", "X"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    ended.add(pid)
    deadline = time.monotonic() + timeout
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
