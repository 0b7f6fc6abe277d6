"""A seat's session: commands run as the seat's user on its display and bus, files read and written in its home.

Every command is an argv executed as given (``argv[0]`` is the program; there is no
shell unless the argv names one), as the seat's user: the child becomes the user
through subprocess's ``user=``/``group=``/``extra_groups=`` (setreuid, setregid and
setgroups in the child before exec, Python's documented way), or runs as the
daemon's own user when that is the seat's. Each command starts a session of its
own (``setsid``), so at its timeout its whole process group is killed; what it
detached further is still the user's, and the reset (:mod:`cud.daemon.session.reset`)
ends every process of the user.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path

from cud.daemon.session import clipboard
from cud.daemon.session.a11y import A11yLauncher, bus_socket_of_another
from cud.daemon.session.commands import Completed, ProcessGroup, collect, feed, feed_pipe, read_all
from cud.daemon.session.home import SeatHome
from cud.daemon.session.namespace import PRIVATE_PLACES, Isolation, SeatNamespace, kept_from_host
from cud.daemon.session.reset import ResetReport, reset_session
from cud.daemon.session.runtime import RuntimeDir
from cud.daemon.session.sweep import SEAT_MARK
from cud.daemon.session.taken import take_home
from cud.daemon.session.template import SeatWriter, template_flaw
from cud.daemon.session.unit import SessionUnit
from cud.daemon.session.user import SeatUser
from cud.daemon.session.xauth import encode, read_entries_for
from cud.errors import SessionError

__all__ = ("Completed", "SeatSession", "session_for")

log = logging.getLogger(__name__)

#: What a session's commands find on PATH: the system's programs, never the daemon's venv.
SESSION_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Largest argv accepted (bytes in all), far under the kernel's ARG_MAX.
MAX_ARGV_BYTES = 128 * 1024


@dataclasses.dataclass(frozen=True)
class SessionPlaces:
    """Where a session lives: its display, its session bus, its template, the daemon's X cookies."""

    display: str | None
    session_bus: str | None
    template: Path | None
    #: The X authority file the daemon uses; the user gets a copy of the display's entries only (the
    #: daemon's is not theirs to read, and may hold other seats' displays' cookies).
    xauthority: Path | None = None
    #: The daemon's state directory, where the homes cud made or took are recorded (cud.daemon.session.taken).
    state_dir: Path | None = None
    #: Private temp directories, the home at a fixed path, no network (cud.daemon.session.namespace).
    isolation: Isolation = Isolation()


#: The switches by which Chromium, and Firefox or Thunderbird (its remote agent, its debugger server), open a
#: debugging endpoint on a TCP port, without their dashes: both take a switch after one dash as after two.
DEBUGGER_FLAGS = ("remote-debugging-port", "remote-debugging-address", "start-debugger-server")


def debugger_flag(argv: Sequence[str]) -> str | None:
    """The first of :data:`DEBUGGER_FLAGS` anywhere in ``argv`` (inside a shell's text too), or None."""
    return next((flag for arg in argv for flag in DEBUGGER_FLAGS if flag in arg), None)


class SeatSession:
    """One per seat that has ``user`` and ``home``: what runs there, and its files."""

    def __init__(self, seat: str, user: SeatUser, home: Path, places: SessionPlaces,
                 unit: SessionUnit | None = None) -> None:
        self.seat = seat
        self.user = user.name
        self.account = user
        self.home = SeatHome(home, user.uid, user.gid)
        # The home as the session starts, closed to other users as the reset leaves it (0700: a home from before
        # may have kept a template's 0755); a home not made yet is made and recorded by the first reset.
        self.places = places
        with contextlib.suppress(SessionError):
            self.home.pin(mode=0o700)
            self._take_home()  # config load accepted it: empty, taken before, or empty_existing_home
        self.template = places.template
        #: The session's runtime directory (XDG_RUNTIME_DIR): the user's, made at the first use, in a directory
        #: of root's (cud.daemon.session.runtime).
        self._runtime = RuntimeDir(seat, user.uid, user.gid)
        self._cookie_copied: int | None = None
        #: Whether the runtime directory holds the display's cookie (written by the daemon, so known here).
        self._cookie_there = False
        self._launched: set[int] = set()
        #: The tasks reaping what :meth:`launch` started, held so the loop cannot collect one mid-wait.
        self._reapers: set[asyncio.Task[None]] = set()
        #: The systemd unit that is the session (``session_unit``): commands run as its transient units.
        self.unit = unit
        #: The session's namespaces (cud.daemon.session.namespace), when its seat asks for isolation; with a session
        #: unit, systemd makes them instead, in each command unit's settings (cud.daemon.session.unit).
        self.namespace = (SeatNamespace(seat, places.isolation) if places.isolation.namespaced and unit is None
                          else None)
        #: The accessibility launcher a reset starts again (cud.daemon.session.a11y).
        self.a11y = A11yLauncher()
        #: Why the reset refuses the seat's session bus (served by a process of the user's), until another
        #: user's bus serves its address (cud.daemon.session.reset).
        self.bus_refused: str | None = None

    # -- environment ---------------------------------------------------------------------
    def own_dirs(self) -> list[Path]:
        """Where an accessibility bus of the user's may listen: the session's runtime directory (once made;
        a launcher of the user's puts its socket in ``at-spi/`` there) and the home's ``.cache/at-spi``
        (its place without a runtime directory). Nothing is made here."""
        dirs = [self.home.root / ".cache" / "at-spi"]
        made = self._runtime.path
        return dirs if made is None else [made, *dirs]

    @property
    def runtime_dir(self) -> Path:
        """The session's own runtime directory (0700, the user's): sockets and the X cookie copy live there."""
        path, made = self._runtime.ensure()
        if made:
            self._cookie_copied, self._cookie_there = None, False
        self._copy_xauthority()
        return path

    @property
    def runtime_made(self) -> Path | None:
        """The runtime directory if one was made (without making one): what the reset empties besides the home."""
        return self._runtime.path

    def _copy_xauthority(self) -> None:
        """Give the user the cookie of the seat's display only, again whenever the daemon's file changed
        (a restarted X server's): the daemon's file may hold every seat's display's (cud.daemon.session.xauth)."""
        source, display = self.places.xauthority, self.places.display
        if source is None or display is None or self._runtime.path is None:
            return
        try:
            stamp = os.stat(source).st_mtime_ns
            if stamp == self._cookie_copied:
                return
            entries = read_entries_for(source, display)
        except OSError:
            return  # no cookie to share: the display takes clients without one (Xvfb in the tests)
        self._cookie_copied = stamp
        # The directory is the user's: whatever the user put at that name goes, and a new file is made.
        self._runtime.unlink("Xauthority")
        self._cookie_there = False
        if not entries:
            return  # the daemon holds no cookie for this display: the user gets none either
        with self._runtime.open_file("Xauthority", os.O_WRONLY | os.O_CREAT | os.O_EXCL) as fd:
            data = memoryview(encode(entries))
            while data:
                data = data[os.write(fd, data):]
        self._cookie_there = True

    @property
    def env(self) -> Mapping[str, str]:
        runtime = self.runtime_dir
        env = {
            "HOME": self.places.isolation.home_path or str(self.home.root),
            "USER": self.user,
            "LOGNAME": self.user,
            "PATH": SESSION_PATH,
            "LANG": "C.UTF-8",
            "XDG_RUNTIME_DIR": str(runtime),
            # Inherited through every fork: how a daemon running as the seat's user tells the session's processes.
            SEAT_MARK: self.seat,
            # Qt and GTK applications then expose their trees on the accessibility bus.
            "QT_ACCESSIBILITY": "1",
            "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1",
        }
        if self.places.display is not None:
            env["DISPLAY"] = self.places.display
        if self._cookie_there:
            env["XAUTHORITY"] = str(runtime / "Xauthority")
        if self.places.session_bus is not None:
            env["DBUS_SESSION_BUS_ADDRESS"] = self.places.session_bus
        return env

    # -- commands ------------------------------------------------------------------------
    def _argv(self, argv: Sequence[str]) -> list[str]:
        items = list(argv)
        if not items or not all(isinstance(a, str) for a in items):
            raise SessionError(f"a command is a non-empty list of strings, got {argv!r}", argv=repr(argv)[:200])
        if any("\x00" in a for a in items):
            raise SessionError(f"command {items[0]!r} has a NUL character in an argument", argv=items[:1])
        if sum(len(os.fsencode(a)) + 1 for a in items) > MAX_ARGV_BYTES:
            raise SessionError(f"command {items[0][:80]!r} is over {MAX_ARGV_BYTES} bytes long", argv=items[:1])
        if not self.places.isolation.private_loopback:
            self._refuse_debugger_port(items)
        return items

    def _refuse_debugger_port(self, items: list[str]) -> None:
        """A browser's DevTools endpoint has no password: whoever reaches its port drives the browser (runs script
        in its pages, reads its cookies). On a loopback the machine's other users share, the seats' users
        included, cud never opens one; the seat's own loopback (``network = "none"``) keeps it to the session.
        Any argument is looked into, so a shell's text (``sh -c "chromium --remote-debugging-port=0"``) is too."""
        flag = debugger_flag(items)
        if flag is not None:
            raise SessionError(
                f"command {items[0][:80]!r} opens a browser's DevTools port ({flag}) on seat {self.seat!r}, whose "
                f"network is {self.places.isolation.network!r}: every local user could reach that port and drive "
                f"the browser; only a seat with network = \"none\" (a loopback of its own) may open one",
                argv=items[:1], seat=self.seat, flag=flag, network=self.places.isolation.network)

    @contextlib.contextmanager
    def _cwd(self, cwd: str | None) -> typing.Iterator[_Cwd]:
        """The working directory ``cwd`` names in the home (None: the home), open for as long as the block runs."""
        fd, path = self.home.open_directory(cwd)
        try:
            yield _Cwd(fd, str(path))
        finally:
            os.close(fd)

    async def _spawn(self, argv: list[str], cwd: _Cwd, **streams: typing.Any) -> asyncio.subprocess.Process:
        if self.namespace is not None:
            return await self._spawn_inside(self.namespace, argv, cwd, **streams)
        # No preexec_fn: it is unsafe with threads, and the daemon has a driver thread per seat. The child
        # changes directory before it becomes the user (subprocess's order): through the descriptor of the
        # directory the home's walk opened (its own copy, /proc/self/fd), never by a name the user could
        # have swapped for a link to a directory only root may enter.
        try:
            return await asyncio.create_subprocess_exec(
                *argv, cwd=f"/proc/self/fd/{cwd.fd}", env=dict(self.env), start_new_session=True, close_fds=True,
                **self.account.become(), **streams)  # type: ignore[misc]  # neither holds "program"
        except OSError as exc:
            raise self._did_not_start(argv, exc.strerror, exc.errno) from None

    async def _spawn_inside(self, namespace: SeatNamespace, argv: list[str], cwd: _Cwd,
                            **streams: typing.Any) -> asyncio.subprocess.Process:
        """:meth:`_spawn` through ``nsexec.py enter``: it joins the session's namespaces, becomes the user, and only
        then enters the working directory (by its path in the namespace: as the user, a link leads nowhere the user
        could not go anyway)."""
        env = dict(self.env)
        bus = self.places.session_bus
        # Only private temp directories can hide another user's accessibility socket: else no bus is asked.
        ask = bus is not None and self.places.isolation.private_tmp
        fds = await namespace.fds(self.places.display, bus, self._runtime.base, self.home.root, self.home.identity,
                                  (lambda: self._a11y_sockets(bus)) if ask and bus is not None else None)
        inner = self.places.isolation.inside(cwd.path, self.home.root)
        user = self.account
        failed, told = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *namespace.enter_argv(fds, user.uid, user.gid, user.groups, inner, told, argv), cwd="/", env=env,
                start_new_session=True, close_fds=True, pass_fds=(told, *(fd for fd in fds if fd is not None)),
                **streams)
        except OSError as exc:
            os.close(failed)
            raise self._did_not_start(argv, exc.strerror, exc.errno) from None
        finally:
            os.close(told)
        why = await asyncio.to_thread(read_all, failed)
        if why:
            await proc.wait()
            code, text = json.loads(why)
            raise self._did_not_start(argv, text, code)
        return proc

    def _did_not_start(self, argv: list[str], why: str | None, code: int | None) -> SessionError:
        return SessionError(f"command {argv[0]!r} did not start on seat {self.seat!r}: {why}", argv=argv[:1],
                            seat=self.seat, errno=code)

    async def _a11y_sockets(self, bus: str) -> list[str]:
        found = await bus_socket_of_another(bus, self.account.uid)
        return [] if found is None else [found]

    async def run(self, argv: Sequence[str], *, timeout: float, stdin: bytes | None = None, cwd: str | None = None,
                  max_output: int = 1 << 20) -> Completed:
        """Run ``argv`` as the seat's user in its session, in ``cwd`` (default: the home), bounded by ``timeout``."""
        items = self._argv(argv)
        with self._cwd(cwd) as where:
            if self.unit is not None:
                return await self._run_in_unit(self.unit, items, where.path, timeout=timeout, stdin=stdin,
                                               max_output=max_output)
            # Pipes of our own, not asyncio's: its wait() also waits for its pipes to close, which
            # a child left running in the background (holding them) would put off for ever.
            pipes = [os.pipe(), os.pipe()]
            try:
                proc = await self._spawn(items, where, stdin=asyncio.subprocess.PIPE if stdin is not None else
                                         asyncio.subprocess.DEVNULL, stdout=pipes[0][1], stderr=pipes[1][1])
            except BaseException:
                for fd in (*pipes[0], *pipes[1]):
                    os.close(fd)
                raise
        for _read, write in pipes:
            os.close(write)
        return await collect(items, ProcessGroup(proc), (pipes[0][0], pipes[1][0]), feed(proc, stdin),
                              timeout=timeout, max_output=max_output)

    def _unit_places(self, cwd: str) -> dict[str, typing.Any]:
        """A command unit's working directory as the session sees it, and what its isolation needs of the session."""
        isolation = self.places.isolation
        kept = kept_from_host(PRIVATE_PLACES, self.places.display, self.places.session_bus, self._runtime.base,
                              None if isolation.home_path else self.home.root)  # at home_path, bound there
        return {"cwd": isolation.inside(cwd, self.home.root), "home": str(self.home.root), "kept": kept}

    async def _run_in_unit(self, unit: SessionUnit, items: list[str], where: str, *, timeout: float,
                           stdin: bytes | None, max_output: int) -> Completed:
        """:meth:`run` as a transient unit of the session's systemd unit (cud.daemon.session.unit): systemd enters
        ``where`` (WorkingDirectory=) once the command is the user's."""
        pipes = [os.pipe(), os.pipe(), os.pipe()]  # stdin, stdout, stderr
        try:
            command = await unit.start(items, env=self.env, stdin=pipes[0][0], stdout=pipes[1][1], stderr=pipes[2][1],
                                       **self._unit_places(where))
        except BaseException:
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
                os.close(fd)
            raise
        finally:  # the command's ends: systemd holds its own copies now
            for fd in (pipes[0][0], pipes[1][1], pipes[2][1]):
                os.close(fd)
        return await collect(items, command, (pipes[1][0], pipes[2][0]), feed_pipe(pipes[0][1], stdin or b""),
                              timeout=timeout, max_output=max_output)

    async def launch(self, argv: Sequence[str], *, cwd: str | None = None) -> int:
        """Start ``argv`` detached in the session (its own session, output to the runtime dir's log); its pid."""
        items = self._argv(argv)
        _ = self.runtime_dir  # made (and the cookie copied) before the log is opened in it
        # Never through a link, never blocking on a FIFO, never a file that is not the user's (runtime.py).
        with self._cwd(cwd) as where, \
                self._runtime.open_file("launched.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND) as fd:
            if self.unit is not None:
                with open(os.devnull, "rb") as nothing:  # noqa: ASYNC230 (opening /dev/null never blocks)
                    command = await self.unit.start(items, env=self.env, stdin=nothing.fileno(), stdout=fd, stderr=fd,
                                                    **self._unit_places(where.path))
                return await command.main_pid()  # ended at the next reset, by systemd
            proc = await self._spawn(items, where, stdin=asyncio.subprocess.DEVNULL, stdout=fd, stderr=fd)
        self._launched.add(proc.pid)
        # Reaped in the background, so a launched program that exits leaves no zombie.
        reaper = asyncio.ensure_future(self._reap(proc))
        self._reapers.add(reaper)
        reaper.add_done_callback(self._reapers.discard)
        return proc.pid

    @property
    def launched(self) -> frozenset[int]:
        """The pids :meth:`launch` started that have not ended yet."""
        return frozenset(self._launched)

    async def _reap(self, proc: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(Exception):
            await proc.wait()
        self._launched.discard(proc.pid)

    # -- files -----------------------------------------------------------------------------
    async def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Write ``data`` to ``path`` in the home: confined, parents made, the user's, all at once."""
        await asyncio.to_thread(self.home.write_bytes, path, data, mode=mode)

    async def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """The file ``path`` in the home (confined), at most ``max_bytes`` long."""
        return await asyncio.to_thread(self.home.read_bytes, path, max_bytes=max_bytes)

    # -- the clipboard and the reset ----------------------------------------------------------
    async def clipboard_get(self, *, max_bytes: int = clipboard.MAX_CLIPBOARD_BYTES) -> str:
        """The text of the seat's CLIPBOARD selection ('' when nobody owns it); over ``max_bytes``: refused."""
        return await clipboard.get(self, max_bytes=max_bytes)

    async def clipboard_set(self, text: str) -> None:
        """Make ``text`` the seat's CLIPBOARD (and PRIMARY) selection, served by a process of the session."""
        await clipboard.set_text(self, text)

    async def reset(self) -> ResetReport:
        """Every process of the session ends, the home is the template again, the clipboard is empty.

        The template is checked again first (cud.daemon.session.template: its tree can change while the daemon
        runs); a template that is no longer one refuses the reset before it touches anything.
        """
        await self.check_template()
        report = await reset_session(self)
        # The home is the one the reset checked (the user's, made if it was missing, 0700): walks from now on
        # must find it.
        await asyncio.to_thread(self.home.pin)
        await asyncio.to_thread(self._take_home)
        return report

    def _take_home(self) -> None:
        """Record the home as pinned as one cud made or took, so a restart accepts it with what is in it."""
        identity = self.home.identity
        if self.places.state_dir is None or identity is None:
            return
        try:
            take_home(self.places.state_dir, str(self.home.root), identity)
        except OSError as exc:
            log.warning("seat %s: the home %s could not be recorded as cud's in %s: %s; a restart will refuse it "
                        "while it holds files", self.seat, self.home.root, self.places.state_dir, exc)

    async def check_template(self) -> None:
        """SessionError naming the template and why, if it may no longer be one (config load checked it once)."""
        if self.template is None:
            return
        # The seat's own user, whom this reset is about (config load also looked for the other seats' users).
        writers = [] if self.account.is_self else [SeatWriter(self.seat, self.account.uid, self.account.groups)]
        flaw = await asyncio.to_thread(template_flaw, self.template, writers)
        if flaw is not None:
            raise SessionError(f"seat {self.seat!r}: the template {str(self.template)!r} is refused: {flaw}; "
                               "the reset did not touch the session", seat=self.seat, template=str(self.template))

    def clear_runtime(self) -> None:
        """Remove the runtime directory and what the session left there, at any depth and never through a link
        (SessionError naming what stays and why); the next use makes a new one."""
        self._runtime.clear()
        self._cookie_copied, self._cookie_there = None, False

    def close(self) -> None:
        """The daemon is stopping: nothing of the session's is kept in the runtime directory."""
        try:
            self._runtime.close()
        except SessionError as exc:  # the daemon stops all the same; the next start makes a new directory
            log.warning("%s", exc)
        if self.unit is not None:
            self.unit.close()
        if self.namespace is not None:
            self.namespace.drop()


@dataclasses.dataclass(frozen=True)
class _Cwd:
    """A command's working directory: a descriptor of it (what the child enters), and its path (for systemd)."""

    fd: int
    path: str


def session_for(seat: str, user: SeatUser | None, home: Path | None, template: Path | None, display: str | None,
                session_bus: str | None, session_unit: str | None = None, *,
                state_dir: Path | None = None, isolation: Isolation | None = None) -> SeatSession | None:
    """The session of a seat configured with ``user`` and ``home`` (None without them); with ``session_unit``,
    a systemd unit holds it (cud.daemon.session.unit)."""
    if user is None or home is None:
        return None
    cookie = os.environ.get("XAUTHORITY") or os.path.expanduser("~/.Xauthority")
    places = SessionPlaces(display, session_bus, template, Path(cookie), state_dir, isolation or Isolation())
    unit = None if session_unit is None else SessionUnit(seat, session_unit, user.name, isolation=places.isolation)
    return SeatSession(seat, user, home, places, unit)
