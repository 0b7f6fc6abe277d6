"""Returning a seat's session to a clean state: its processes end, its home is the template again, its clipboard empty.

In order, each step with a deadline; a step that cannot finish fails the reset with
:class:`~cud.errors.SessionError` naming what is left (the seat then becomes
``unavailable`` with that reason, and no task runs on it):

1. **Processes.** The seat's user belongs to the seat, so "the session" is every
   process of that uid: whatever setsid, nohup or a double fork detached is still
   the user's. A helper running as the user sends ``kill(-1, SIGKILL)`` (the kernel
   signals every process the user may signal in one pass, under the task-list lock,
   so a fork bomb cannot outrun it), and ``/proc`` is read until none is left.
   What D-Bus activation started on a bus the user runs is the user's and goes too;
   what it started on a bus of another user is found as the bus daemon's children
   (:func:`_bus_children`). A daemon that runs as the seat's user itself cannot
   kill every process of its uid (it would be one): it ends those that carry the
   session's mark (``CUD_SEAT`` in their environment, inherited through every fork).
2. **X clients.** Every client on the seat's display that is the user's or has a
   window on screen, the window manager excepted, is disconnected (``XKillClient``)
   until none is left: an application started by someone else (the sandbox's demo
   app, a root shell) goes too.
3. **The clipboard.** CLIPBOARD and PRIMARY end without an owner.
4. **The home.** Emptied through a descriptor of it (``shutil.rmtree`` with
   ``dir_fd``: never following a symlink), then the template is copied in by ``cp
   -a --reflink=auto`` running as the seat's user, so the copy is the user's and can
   only write where the user may. Measured in docs/sessions.md: a copy is well under
   the budget for 100 MB, so nothing more complicated (an overlay mount) is needed.
5. **The runtime directory** (XDG_RUNTIME_DIR) is emptied: the session's sockets and
   caches go, its X cookie copy is written again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import stat
import time
from typing import TYPE_CHECKING

from cud.daemon.session import xclients
from cud.errors import SessionError

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("RESET_TIMEOUT", "ResetReport", "reset_session", "session_pids")

#: Seconds each step of a reset may take before the reset fails.
RESET_TIMEOUT = 10.0
#: The mark every process started in a session carries in its environment (for a daemon that is the seat's user).
SEAT_MARK = "CUD_SEAT"
_POLL = 0.01


@dataclasses.dataclass(frozen=True)
class ResetReport:
    #: Processes of the session that were ended.
    processes: int
    #: X clients disconnected (after the processes ended: those of other users, or remote).
    x_clients: int
    #: Entries (files, directories, links...) of the home after the copy.
    home_entries: int
    seconds: float


def _status(pid: str) -> tuple[int, int, str] | None:
    """(real uid, effective uid, state letter) of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    uids, state = None, "?"
    for line in text.splitlines():
        if line.startswith("Uid:"):
            uids = line.split()[1:3]
        elif line.startswith("State:"):
            state = line.split()[1]
    return (int(uids[0]), int(uids[1]), state) if uids else None


def _marked(pid: str, mark: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return mark in fh.read().split(b"\0")
    except OSError:
        return False


def session_pids(uid: int, mark: bytes | None = None) -> list[int]:
    """Live processes (zombies are already dead) whose real or effective uid is ``uid`` (with ``mark``, if given)."""
    me = str(os.getpid())
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == me:
            continue
        status = _status(entry)
        if status is None or uid not in status[:2] or status[2] in ("Z", "X"):
            continue
        if mark is not None and not _marked(entry, mark):
            continue
        found.append(int(entry))
    return found


def _bus_children(session: SeatSession) -> list[int]:
    """Processes D-Bus activation started on the seat's bus: children of its bus daemon, when it is not the user's."""
    address = session.places.session_bus or ""
    if not address.startswith("unix:path="):
        return []
    path = address.split("=", 1)[1].split(",", 1)[0]
    bus_pid = _listener_pid(path)
    if bus_pid is None:
        return []
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ')'.
                    fields = fh.read().rsplit(b")", 1)[1].split()
                if int(fields[1]) == bus_pid:
                    children.append(int(entry))
    return children


def _listener_pid(path: str) -> int | None:
    """The pid of the process listening on the Unix socket ``path`` (through /proc/net/unix and each fd)."""
    inode = None
    with contextlib.suppress(OSError):
        with open("/proc/net/unix") as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == path and fields[5] == "01":  # state 01: listening
                    inode = fields[6]
                    break
    if inode is None:
        return None
    wanted = f"socket:[{inode}]"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") == wanted:
                        return int(entry)
    return None


async def _end_processes(session: SeatSession) -> int:
    uid = session.account.uid
    mark = None if not session.account.is_self else f"{SEAT_MARK}={session.seat}".encode()
    ended: set[int] = set()
    deadline = time.monotonic() + RESET_TIMEOUT
    if session.places.session_bus is not None and not session.account.is_self:
        for pid in _bus_children(session):
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{pid}").st_uid != uid:  # the user's own go with the rest
                    os.kill(pid, signal.SIGKILL)
                    ended.add(pid)
    while True:
        left = session_pids(uid, mark)
        if not left:
            return len(ended)
        ended.update(left)
        if time.monotonic() > deadline:
            raise SessionError(f"seat {session.seat!r}: {len(left)} processes of user {session.user!r} did not end "
                               f"within {RESET_TIMEOUT:g} s (pids {left[:10]})", seat=session.seat, pids=left[:10])
        if mark is None:
            await _kill_all_as_user(session)
        else:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(_POLL)


async def _kill_all_as_user(session: SeatSession) -> None:
    """``kill(-1, SIGKILL)`` from a process of the seat's user: every process of the user at once."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/kill", "-KILL", "-1", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"}, cwd="/", start_new_session=True,
        **session.account.become())  # type: ignore[arg-type]
    await proc.wait()  # killed by its own signal, like the rest


async def _end_x_clients(session: SeatSession) -> int:
    name = session.places.display
    if name is None:
        return 0
    uid, ended = session.account.uid, 0
    deadline = time.monotonic() + RESET_TIMEOUT
    while True:
        try:
            left = await asyncio.to_thread(xclients.session_clients, name, uid)
        except Exception as exc:  # python-xlib raises its own, unrelated, error classes
            raise SessionError(f"seat {session.seat!r}: the display {name} did not answer the reset: {exc}",
                               seat=session.seat) from None
        if not left:
            return ended
        if time.monotonic() > deadline:
            raise SessionError(f"seat {session.seat!r}: {len(left)} X clients (pids "
                               f"{[c.pid for c in left][:10]}) stayed on {name} within {RESET_TIMEOUT:g} s",
                               seat=session.seat)
        await asyncio.to_thread(xclients.kill_clients, name, left)
        ended += len(left)
        await asyncio.sleep(_POLL)


async def _clear_clipboard(session: SeatSession) -> None:
    name = session.places.display
    if name is None:
        return
    owners = await asyncio.to_thread(xclients.selection_owners, name)
    if any(owners.values()):
        await asyncio.to_thread(xclients.clear_selections, name)
        owners = await asyncio.to_thread(xclients.selection_owners, name)
        if any(owners.values()):
            raise SessionError(f"seat {session.seat!r}: the clipboard of {name} still has an owner", seat=session.seat)


def _empty_home(session: SeatSession) -> None:
    """Remove everything in the home, through a descriptor of it (never a symlink's target)."""
    root = session.home.root
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        os.mkdir(root, 0o755)
        if os.geteuid() == 0:
            os.chown(root, session.account.uid, session.account.gid)
        return
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != session.account.uid:
        raise SessionError(f"seat {session.seat!r}: the home {str(root)!r} is no longer a directory of user "
                           f"{session.user!r}; not touching it", seat=session.seat, home=str(root))
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.geteuid() != 0:
            os.fchmod(fd, 0o700)  # a user may have left its own home unwritable
        for entry in os.listdir(fd):
            try:
                if stat.S_ISDIR(os.lstat(entry, dir_fd=fd).st_mode):
                    shutil.rmtree(entry, dir_fd=fd)
                else:
                    os.unlink(entry, dir_fd=fd)
            except OSError as exc:
                raise SessionError(f"seat {session.seat!r}: {entry!r} in the home could not be removed: "
                                   f"{exc.strerror}", seat=session.seat, path=entry) from None
    finally:
        os.close(fd)


async def _fill_home(session: SeatSession) -> int:
    root = session.home.root
    template = session.template
    if template is not None:
        proc = await asyncio.create_subprocess_exec(
            "/bin/cp", "-a", "--reflink=auto", "--no-target-directory", "--", str(template), str(root),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/", start_new_session=True,
            **session.account.become())  # type: ignore[arg-type]
        try:
            _out, err = await asyncio.wait_for(proc.communicate(), RESET_TIMEOUT)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise SessionError(f"seat {session.seat!r}: copying the template {str(template)!r} took over "
                               f"{RESET_TIMEOUT:g} s", seat=session.seat) from None
        if proc.returncode != 0:
            raise SessionError(f"seat {session.seat!r}: copying the template {str(template)!r} into the home "
                               f"failed: {err.decode(errors='replace').strip()[:300]}", seat=session.seat)
    else:
        os.chmod(root, 0o700)
    return sum(len(dirs) + len(files) for _top, dirs, files in os.walk(root))


async def reset_session(session: SeatSession) -> ResetReport:
    """Steps 1 to 5 of the module's text, in order; SessionError naming what is left if one fails."""
    started = time.monotonic()
    processes = await _end_processes(session)
    x_clients = await _end_x_clients(session)
    await _clear_clipboard(session)
    await asyncio.to_thread(_empty_home, session)
    entries = await _fill_home(session)
    session.clear_runtime()
    return ResetReport(processes, x_clients, entries, time.monotonic() - started)
