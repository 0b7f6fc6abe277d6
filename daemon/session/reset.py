"""Returning a seat's session to a clean state: its processes end, its home is the template again, its clipboard empty.

In order, each step with a deadline; a step that cannot finish fails the reset with
:class:`~cud.errors.SessionError` naming what is left (the seat then becomes
``unavailable`` with that reason, and no task runs on it):

1. **Processes.** With a session unit (``session_unit``), systemd stops it and starts
   it again (:mod:`cud.daemon.session.unit`): every command's cgroup goes with it. Then,
   and without a unit, every process of the seat's user (:mod:`cud.daemon.session.sweep`):
   whatever setsid, nohup, a double fork or D-Bus activation started (with a unit: only
   what escaped it), whatever names it owns on a bus (an accessibility launcher of the
   user's is started again at the end: :mod:`cud.daemon.session.a11y`). The seat's session
   bus daemon is spared only when it is another user's; one of the seat's user's ends too,
   and the reset fails naming it, at every reset until another user's bus listens there.
   Then the System V IPC objects of the user (shared memory, semaphores, message queues), which
   outlive processes, are removed (:mod:`cud.daemon.session.ipc`).
2. **The display's door.** Access control is on again and the host access list (``xhost``) is
   empty: an ``xhost +`` or ``xhost +si:localuser:NAME`` of the session would otherwise let
   every local user in without the cookie, for every later task (the server keeps the list
   while anything stays connected). Read back; anything left fails the reset.
3. **X clients.** Every client on the seat's display that is the user's or has a
   window on screen, the window manager excepted, is disconnected (``XKillClient``)
   until none is left: an application started by someone else (the sandbox's demo
   app, a root shell) goes too. If step 2 found the door open, so does every client
   that is not root's, the daemon's user's or the X server's user's: it may have come in
   through the door, without a window, to watch and type into later tasks.
4. **The clipboard.** CLIPBOARD and PRIMARY end without an owner.
5. **The home.** Emptied through a descriptor of it, at any depth, never following
   a link (:mod:`cud.daemon.session.remove`), then the template is copied by ``cp -a
   --reflink=auto`` (types, modes, symlinks, times; a reflink where the file system
   has them) into a staging directory of the daemon's (0700) in the home, reached
   through its descriptor, given to the seat's user there (``chown -R -P``), and its
   entries renamed into the home through descriptors: nothing root writes follows a
   link the user could have planted, even if something of the user's still ran.
   Measured in docs/sessions.md: the copy is well under the budget for 100 MB, so
   nothing more complicated (an overlay mount) is needed.
6. **The runtime directory** (XDG_RUNTIME_DIR) is emptied: the session's sockets and
   caches go, its X cookie copy is written again. A seat with isolation drops its
   namespaces (:mod:`cud.daemon.session.namespace`): its private ``/tmp``, ``/var/tmp``,
   ``/dev/shm`` and ``/run/lock`` go with them, and the next command gets empty ones.
7. **The accessibility launcher**, if the seat had one of its user's, is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import time
from typing import TYPE_CHECKING

from cud.daemon.session import xclients
from cud.daemon.session.ipc import remove_ipc_of
from cud.daemon.session.mounts import detach_user_mounts
from cud.daemon.session.remove import remove_contents
from cud.daemon.session.sweep import SEAT_MARK, bus_daemon, bus_of_session, end_processes, session_pids, spared
from cud.errors import CudError, SessionError

if TYPE_CHECKING:
    from cud.daemon.session.processes import SeatSession

__all__ = ("RESET_TIMEOUT", "ResetReport", "reset_session")

#: Seconds each step of a reset may take before the reset fails.
RESET_TIMEOUT = 10.0
#: Seconds the home's removal may take. Longer than the other steps: each rmdir can cost milliseconds
#: (2.5 ms measured on ext4 mounted with discard, the CI machines' kind), so a 5000-deep tree a model
#: built from a plain prompt takes 12 s there; still bounded, so a tree that never ends fails the reset.
REMOVE_TIMEOUT = 60.0
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


async def _end_session(session: SeatSession) -> tuple[int, frozenset[int]]:
    """Step 1: with a session unit, systemd stops it (every command unit's cgroup with it) and starts it again;
    then, and without one, the uid sweep ends what is left (with a unit: what escaped it, such as services D-Bus
    activation started outside it). A session bus of the seat's user ends with the rest, and fails the reset."""
    uid, mark = session.account.uid, session.account.is_self
    await session.a11y.note(session)  # a launcher of the user's ends below: started again at the end
    address = session.places.session_bus
    marked = f"{SEAT_MARK}={session.seat}".encode() if mark else None
    bus = await bus_daemon(address)
    users_bus = bus is not None and bus_of_session(bus, uid, marked)  # before the sweep ends it
    before = 0
    if session.unit is not None:
        before = len(session_pids(uid, marked, spared(bus, uid, marked)))
        await session.unit.restart(RESET_TIMEOUT)
    swept, spare = await end_processes(uid, seat=session.seat, session_bus=address, bus=bus, marked=mark,
                                       timeout=RESET_TIMEOUT)
    _refuse_a_bus_of_the_session(session, bus, users_bus)
    return max(before, swept), spare


def _refuse_a_bus_of_the_session(session: SeatSession, bus: tuple[int, int] | None, users_bus: bool) -> None:
    """SessionError when the seat's session bus was served by a process of the session (the sweep ended it):
    the seat's user could end it and listen at its address with a program of its own, so cud keeps no bus of
    the user's. Remembered (:attr:`SeatSession.bus_refused`) until another user's bus listens there: the bus
    ended, a later reset would otherwise find nobody listening and hand out a seat without its bus."""
    if bus is not None and not users_bus:
        session.bus_refused = None  # another user's bus serves the address (again)
    elif bus is not None:
        user = session.account
        session.bus_refused = (
            f"seat {session.seat!r}: its session bus {session.places.session_bus} was served by pid {bus[0]}, "
            f"a process of its user {user.name!r} (uid {user.uid}), which the reset ends with the rest of the "
            f"session; run the seat's session bus as another user (root, or a bus user as cud-bus@ does) with a "
            f"policy admitting {user.name!r}, its socket in a directory {user.name!r} cannot write "
            "(docs/sessions.md)")
    if session.bus_refused is not None:
        raise SessionError(session.bus_refused, seat=session.seat, bus=session.places.session_bus)


async def _end_x_clients(session: SeatSession, spared: frozenset[int], *, strangers: bool) -> int:
    name = session.places.display
    if name is None:
        return 0
    uid, ended = session.account.uid, 0
    deadline = time.monotonic() + RESET_TIMEOUT
    while True:
        try:
            left = await asyncio.to_thread(xclients.session_clients, name, uid, spared, strangers=strangers)
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


async def _close_access(session: SeatSession) -> bool:
    """Step 2: whether the display's door was open (then step 3 also ends the strangers who may have come in)."""
    name = session.places.display
    if name is None:
        return False
    was_open, left = await asyncio.to_thread(xclients.close_access, name)
    if left:
        raise SessionError(f"seat {session.seat!r}: the display {name} still lets clients in without its cookie "
                           f"after the reset: {', '.join(left)}", seat=session.seat, display=name, entries=left)
    return was_open


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


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_home(session: SeatSession) -> int:
    """The home, opened without following a link; it must be a directory of the seat's user."""
    root = session.home.root
    try:
        fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise SessionError(f"seat {session.seat!r}: the home {str(root)!r} could not be opened: {exc.strerror}; "
                           "not touching it", seat=session.seat, home=str(root)) from None
    info = os.fstat(fd)
    if info.st_uid != session.account.uid:
        os.close(fd)
        raise SessionError(f"seat {session.seat!r}: the home {str(root)!r} is no longer a directory of user "
                           f"{session.user!r}; not touching it", seat=session.seat, home=str(root))
    return fd


def _empty_home(session: SeatSession) -> None:
    """Remove everything in the home, through a descriptor of it (never a symlink's target), at any depth."""
    root = session.home.root
    if not os.path.lexists(root):
        os.mkdir(root, 0o700)
        if os.geteuid() == 0:
            os.chown(root, session.account.uid, session.account.gid, follow_symlinks=False)
    fd = _open_home(session)
    try:
        if os.geteuid() != 0:
            os.fchmod(fd, 0o700)  # a user may have left its own home unwritable
        remove_contents(fd, str(root), deadline=time.monotonic() + REMOVE_TIMEOUT, what=f"seat {session.seat!r}")
    finally:
        os.close(fd)


def _make_stage(session: SeatSession, home_fd: int) -> tuple[str, int]:
    """A directory of the daemon's, 0700, in the home (the same file system: its entries are renamed in):
    the seat's user can neither enter it nor put anything in it, so the copy there follows no link of theirs."""
    name = f".cud-reset-{secrets.token_hex(8)}"
    os.mkdir(name, 0o700, dir_fd=home_fd)
    fd = os.open(name, _DIR_FLAGS, dir_fd=home_fd)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise SessionError(f"seat {session.seat!r}: the reset's staging directory {name!r} in the home was "
                           "replaced as it was made", seat=session.seat, path=name)
    return name, fd


def _drop_stage(session: SeatSession, home_fd: int, name: str, fd: int) -> None:
    """The staging directory and what is left in it go (the one made: checked by its identity)."""
    try:
        remove_contents(fd, f"{session.home.root}/{name}", deadline=time.monotonic() + REMOVE_TIMEOUT,
                        what=f"seat {session.seat!r}")
        made = os.fstat(fd)
        with contextlib.suppress(FileNotFoundError):
            there = os.lstat(name, dir_fd=home_fd)
            if (there.st_dev, there.st_ino) == (made.st_dev, made.st_ino):
                os.rmdir(name, dir_fd=home_fd)
    finally:
        os.close(fd)


def _move_in(session: SeatSession, stage_fd: int, home_fd: int) -> None:
    """The copy's entries renamed into the home (a rename follows no link), then the home takes the template's
    times, as ``cp -a`` gives them, but not its mode: the home is 0700, so no other seat's user reads it (the
    template is typically 0755)."""
    copy = os.open(_COPY, _DIR_FLAGS, dir_fd=stage_fd)
    try:
        for name in os.listdir(copy):
            try:
                os.rename(name, name, src_dir_fd=copy, dst_dir_fd=home_fd)
            except OSError as exc:
                raise SessionError(f"seat {session.seat!r}: {name!r} of the template could not be put in the home: "
                                   f"{exc.strerror}", seat=session.seat, path=name) from None
        info = os.fstat(copy)
        os.fchmod(home_fd, 0o700)
        os.utime(home_fd, ns=(info.st_atime_ns, info.st_mtime_ns))
    finally:
        os.close(copy)


#: The template's copy in the staging directory.
_COPY = "home"


async def _fill_home(session: SeatSession) -> int:
    """The template copied in: by ``cp -a`` into a staging directory of the daemon's (reached through its
    descriptor, never a path the user could swap), given to the user there, then renamed into the home."""
    root = session.home.root
    template = session.template
    home_fd = await asyncio.to_thread(_open_home, session)
    try:
        if template is None:
            os.fchmod(home_fd, 0o700)
        else:
            name, stage = await asyncio.to_thread(_make_stage, session, home_fd)
            try:
                copy = f"/proc/self/fd/{stage}/{_COPY}"  # the staging directory itself, whatever its name now
                await _tool(session, ["/bin/cp", "-a", "--reflink=auto", "--no-preserve=ownership",
                                      "--no-target-directory", "--", str(template), copy],
                            f"copying the template {str(template)!r} into the home", keep=stage)
                if os.geteuid() == 0:  # the copy is root's until given to the user (-P: links themselves)
                    await _tool(session, ["/bin/chown", "-R", "-P", f"{session.account.uid}:{session.account.gid}",
                                          "--", copy], "giving the home to its user", keep=stage)
                await asyncio.to_thread(_move_in, session, stage, home_fd)
            finally:
                await asyncio.to_thread(_drop_stage, session, home_fd, name, stage)
    finally:
        os.close(home_fd)
    return sum(len(dirs) + len(files) for _top, dirs, files in os.walk(root))


async def _tool(session: SeatSession, argv: list[str], what: str, *, keep: int) -> None:
    """Run one of coreutils' tools for the reset, with the descriptor ``keep`` (the staging directory)."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/", start_new_session=True, pass_fds=(keep,))
    try:
        _out, err = await asyncio.wait_for(proc.communicate(), RESET_TIMEOUT)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise SessionError(f"seat {session.seat!r}: {what} took over {RESET_TIMEOUT:g} s", seat=session.seat) from None
    if proc.returncode != 0:
        raise SessionError(f"seat {session.seat!r}: {what} failed: {err.decode(errors='replace').strip()[:300]}",
                           seat=session.seat)


async def reset_session(session: SeatSession) -> ResetReport:
    """Steps 1 to 7 of the module's text, in order; SessionError naming what is left if one fails."""
    started = time.monotonic()
    try:
        processes, spared = await _end_session(session)
        if not session.account.is_self:  # a daemon of the seat's user would remove its own objects too
            await asyncio.to_thread(remove_ipc_of, session.account.uid, session.seat)
        was_open = await _close_access(session)
        x_clients = await _end_x_clients(session, spared, strangers=was_open)
        await _clear_clipboard(session)
        await asyncio.to_thread(detach_user_mounts, [session.home.root, *filter(None, [session.runtime_made])],
                                f"seat {session.seat!r}")  # a user's FUSE mount would stop the removal for good
        await asyncio.to_thread(_empty_home, session)
        entries = await _fill_home(session)
        await asyncio.to_thread(session.clear_runtime)  # at any depth: not on the event loop
        if session.namespace is not None:  # nothing of the user's runs: its private places go with them
            await asyncio.to_thread(session.home.pin)  # the home the new namespaces bind (it may have been made)
            session.namespace.drop()
        await session.a11y.restore(session, RESET_TIMEOUT)
    except CudError:
        raise
    except Exception as exc:  # an OSError of the home, python-xlib's own errors: the reset did not finish
        raise SessionError(f"seat {session.seat!r}: the reset did not finish: {type(exc).__name__}: {exc}",
                           seat=session.seat) from exc
    return ResetReport(processes, x_clients, entries, time.monotonic() - started)
