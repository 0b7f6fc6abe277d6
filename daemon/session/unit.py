"""A seat's session as a systemd unit: commands run as transient units bound to it, and the reset restarts it.

With ``[[seats]] session_unit = "cud-session@N.service"`` (docs/sessions.md) the session is
that unit and what is started in it, and systemd, not cud, owns their processes:

* every command (setup's ``run``/``launch``, ``cuctl exec``, the clipboard's xclip) is a
  transient service started through ``org.freedesktop.systemd1.Manager.StartTransientUnit``
  with ``User=`` the seat's user, ``PartOf=``, ``Requisite=`` and ``After=`` the session unit:
  a control group of its own, which holds whatever the command forks, daemonises,
  ``setsid``s or ``nohup``s (a process cannot leave its cgroup), and which stopping the
  session unit stops (``PartOf=``) by killing every process in it (``KillMode=control-group``,
  the default). ``RemainAfterExit=yes`` keeps what a ``run`` left behind alive until the reset,
  as without a unit; ``KillSignal=SIGKILL``: the reset discards the session, nobody waits for it;
* the reset stops the session unit and starts it again (two jobs, each waited for, bounded in
  time). Not ``RestartUnit``: systemd propagates a restart through ``PartOf=`` as a restart,
  which would run every command of the session again.

A seat's isolation (``private_tmp``, ``home_path``, ``network = "none"``: docs/sessions.md, "A seat
of its own") is systemd's too, in each command unit's settings: ``PrivateTmp=yes`` and
``PrivateNetwork=yes`` with ``JoinsNamespaceOf=`` the session unit, so every command of one session
shares the session unit's temp directories and network namespace, which systemd makes when the
session unit starts and removes when it stops (the reset); ``/dev/shm`` and ``/run/lock`` bound from
the session unit's own ``RuntimeDirectory=`` (``…/shm``, ``…/lock``: removed when it stops);
``TemporaryFileSystem=/home`` and ``BindPaths=`` the home at ``home_path``. The session unit's side
cannot be set by cud (a unit file of the admin's), so it is checked before every reset and at the
first command, naming the setting and its fix.

The calls go over the system bus (``DBUS_SYSTEM_BUS_ADDRESS`` if set, as every D-Bus client
reads it) with dbus-fast, which the daemon already uses for AT-SPI; the commands' stdin, stdout
and stderr are file descriptors passed with the call (``Standard*FileDescriptor``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import time
from collections.abc import Mapping, Sequence
from typing import Any

from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

from cud.daemon.session.namespace import Isolation
from cud.errors import SessionError

__all__ = ("COMMAND_UNIT_PREFIX", "CommandUnit", "SessionUnit")

_SYSTEMD = "org.freedesktop.systemd1"
_MANAGER_PATH = "/org/freedesktop/systemd1"
_MANAGER = "org.freedesktop.systemd1.Manager"
_UNIT = "org.freedesktop.systemd1.Unit"
_SERVICE = "org.freedesktop.systemd1.Service"
_PROPERTIES = "org.freedesktop.DBus.Properties"
#: What systemd answers about a unit object that is no longer loaded.
_GONE = ("org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.systemd1.NoSuchUnit")
#: Transient units cud starts are named ``cud-cmd-<16 hex>.service`` (a polkit rule can match the prefix).
COMMAND_UNIT_PREFIX = "cud-cmd-"
#: The sub-states in which a command unit's main process has ended.
_ENDED = ("exited", "failed", "dead")
#: si_code values systemd reports in ExecMainCode (waitid(2)).
_CLD_EXITED = 1
_POLL = 0.01
_MAX_POLL = 0.25
_MAX_ENDED_JOBS = 64
#: The exit statuses systemd's own spawn steps use when they fail (200 CHDIR ... 203 EXEC ... 217 USER ...,
#: systemd.exec(5)): with Type=exec such a status means the program never ran. (A program that itself exits
#: with one of them, before systemd saw it start, is taken for one that did not start.)
_SPAWN_FAILED = range(200, 250)
#: mount(2)'s MS_REC: a bind of a directory brings what is mounted under it (BindPaths='s default in a unit file).
_MS_REC = 0x4000
#: The session unit's RuntimeDirectory= entries (their last component) that become its /dev/shm and /run/lock.
SHARED_PLACES = {"shm": "/dev/shm", "lock": "/run/lock"}


class CommandUnit:
    """A command started as a transient unit of the session: its end, its exit status, killing all of it."""

    def __init__(self, owner: SessionUnit, name: str, path: str) -> None:
        self._owner = owner
        self.name = name
        self.path = path
        #: Set once the main process has ended: its exit status, or minus the signal that killed it.
        self.returncode: int | None = None

    async def main_pid(self) -> int:
        return int(await self._owner._get(self.path, _SERVICE, "MainPID"))

    async def wait(self) -> int:
        """Until the command's main process has ended (what it left behind stays, as ``RemainAfterExit=yes``)."""
        delay = _POLL
        while self.returncode is None:
            try:
                state = await self._owner._get(self.path, _UNIT, "SubState")
            except SessionError as exc:
                if exc.details.get("error") not in _GONE:
                    raise
                # Gone: stopped with the session (a reset while it ran) and collected; SIGKILL ended it.
                self.returncode = -signal.SIGKILL
                break
            if state in _ENDED:
                code = int(await self._owner._get(self.path, _SERVICE, "ExecMainCode"))
                status = int(await self._owner._get(self.path, _SERVICE, "ExecMainStatus"))
                self.returncode = status if code == _CLD_EXITED else -status
                if state == "failed":  # a failed unit stays loaded until someone resets it
                    with contextlib.suppress(SessionError):
                        await self._owner._call(_MANAGER_PATH, _MANAGER, "ResetFailedUnit", "s", [self.name])
                break
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, _MAX_POLL)  # a long command is asked a few times a second, not 100
        return self.returncode

    async def kill(self) -> None:
        """SIGKILL every process of the command's unit (its timeout: what it forked goes too)."""
        with contextlib.suppress(SessionError):  # it may have ended in between
            await self._owner._call(_MANAGER_PATH, _MANAGER, "KillUnit", "ssi", [self.name, "all", signal.SIGKILL])


class SessionUnit:
    """The unit that is a seat's session, and the transient units of its commands."""

    def __init__(self, seat: str, unit: str, user: str, *, bus_address: str | None = None,
                 isolation: Isolation | None = None) -> None:
        self.seat = seat
        self.unit = unit
        self.user = user
        self.isolation = isolation or Isolation()
        #: The host's directories the session unit made for its /dev/shm and /run/lock (``private_tmp``), once checked.
        self._shared: dict[str, str] = {}
        #: Whether the unit was found to have what the isolation needs (before each reset, or the first command).
        self._checked = False
        self._address = bus_address
        self._bus: MessageBus | None = None
        self._jobs: dict[str, asyncio.Future[str]] = {}
        self._ended_jobs: dict[str, str] = {}

    # -- the bus -------------------------------------------------------------------------------
    async def _connect(self) -> MessageBus:
        if self._bus is not None and self._bus.connected:
            return self._bus
        try:
            bus = MessageBus(bus_address=self._address, bus_type=BusType.SYSTEM, negotiate_unix_fd=True)
            await asyncio.wait_for(bus.connect(), 5)
        except Exception as exc:  # OSError, a timeout, and dbus-fast's own classes (AuthError...)
            raise SessionError(f"seat {self.seat!r}: cannot reach systemd over the system bus for its session unit "
                               f"{self.unit!r}: {type(exc).__name__}: {exc}", seat=self.seat, unit=self.unit) from None
        bus.add_message_handler(self._on_message)
        self._bus = bus
        await self._call(_MANAGER_PATH, _MANAGER, "Subscribe", "", [])  # JobRemoved signals from here on
        await self._call("/org/freedesktop/DBus", "org.freedesktop.DBus", "AddMatch", "s",
                         [f"type='signal',sender='{_SYSTEMD}',interface='{_MANAGER}',member='JobRemoved'"],
                         destination="org.freedesktop.DBus")
        return bus

    def _on_message(self, message: Message) -> None:
        if message.message_type == MessageType.SIGNAL and message.member == "JobRemoved":
            _id, job, unit, result = message.body
            waiter = self._jobs.pop(job, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(result)
            elif waiter is None and (unit == self.unit or unit.startswith(COMMAND_UNIT_PREFIX)):
                # Ended before its call's reply was read (systemd sends every job's end, of every unit, to
                # subscribers: only ours are kept, and only the last few, so this never grows).
                self._ended_jobs[job] = result
                while len(self._ended_jobs) > _MAX_ENDED_JOBS:
                    del self._ended_jobs[next(iter(self._ended_jobs))]

    async def _call(self, path: str, interface: str, member: str, signature: str, body: list[Any], *,
                    destination: str = _SYSTEMD, unix_fds: Sequence[int] = ()) -> list[Any]:
        bus = await self._connect() if self._bus is None or not self._bus.connected else self._bus
        try:
            reply = await asyncio.wait_for(bus.call(Message(
                destination=destination, path=path, interface=interface, member=member, signature=signature,
                body=body, unix_fds=list(unix_fds))), 10)
        except Exception as exc:  # OSError, a timeout, EOFError, dbus-fast's own (a bus that went away)
            raise SessionError(f"seat {self.seat!r}: systemd did not answer {member} for {self.unit!r}: "
                               f"{type(exc).__name__}: {exc}", seat=self.seat, unit=self.unit) from None
        assert reply is not None
        if reply.message_type == MessageType.ERROR:
            text = reply.body[0] if reply.body else ""
            raise SessionError(f"seat {self.seat!r}: systemd refused {member} ({reply.error_name}: {text})",
                               seat=self.seat, unit=self.unit, error=reply.error_name)
        return list(reply.body)

    async def _get(self, path: str, interface: str, name: str) -> Any:
        (variant,) = await self._call(path, _PROPERTIES, "Get", "ss", [interface, name])
        return variant.value

    async def _job(self, member: str, signature: str, body: list[Any], deadline: float, *,
                   unix_fds: Sequence[int] = ()) -> str:
        """Queue a job (StartUnit, StopUnit, StartTransientUnit) and wait until it is done: its result."""
        await self._connect()
        (job,) = await self._call(_MANAGER_PATH, _MANAGER, member, signature, body, unix_fds=unix_fds)
        if job in self._ended_jobs:
            return self._ended_jobs.pop(job)
        waiter = self._jobs.setdefault(job, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(waiter, max(deadline - time.monotonic(), 0.01))
        except TimeoutError:
            self._jobs.pop(job, None)
            raise SessionError(f"seat {self.seat!r}: systemd's {member} job for {body[0]!r} did not finish in time",
                               seat=self.seat, unit=body[0]) from None

    # -- the session -----------------------------------------------------------------------------
    async def check_unit(self) -> None:
        """Refuse a unit that does not run as the seat's user (it would not be the seat's session), or that lacks
        what the seat's isolation needs of it (its commands join its namespaces)."""
        self._checked = False
        (path,) = await self._call(_MANAGER_PATH, _MANAGER, "LoadUnit", "s", [self.unit])
        state = await self._get(path, _UNIT, "LoadState")
        if state != "loaded":
            raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} is {state} in systemd "
                               "(is it installed? see docs/systemd.md)", seat=self.seat, unit=self.unit)
        user = await self._get(path, _SERVICE, "User")
        if user != self.user:
            raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} runs as User={user or 'root'!s}, "
                               f"not the seat's user {self.user!r}; not using it", seat=self.seat, unit=self.unit)
        wants = [("PrivateTmp", "private_tmp = true")] if self.isolation.private_tmp else []
        if self.isolation.network == "none":
            wants.append(("PrivateNetwork", 'network = "none"'))
        for setting, key in wants:
            # JoinsNamespaceOf= joins only what both units have: without it there, each command would get its own.
            if not await self._get(path, _SERVICE, setting):
                raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} has {setting}=no, and the "
                                   f"seat's {key} needs {setting}=yes there (its commands join the session unit's "
                                   "namespaces); set it as systemd/cud-session@.service does, or remove the key",
                                   seat=self.seat, unit=self.unit, setting=setting)
        if self.isolation.private_tmp:
            made = {entry.rpartition("/")[2]: f"/run/{entry}" for entry in await self._get(path, _SERVICE,
                                                                                         "RuntimeDirectory")}
            missing = [name for name in SHARED_PLACES if name not in made]
            if missing:
                raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} has no RuntimeDirectory= "
                                   f"ending in {' or '.join(f'/{m}' for m in missing)}, and the seat's private_tmp = "
                                   "true makes the session's /dev/shm and /run/lock of them; set RuntimeDirectory= as "
                                   "systemd/cud-session@.service does, or remove the key", seat=self.seat,
                                   unit=self.unit, setting="RuntimeDirectory")
            self._shared = {SHARED_PLACES[name]: made[name] for name in SHARED_PLACES}
        self._checked = True

    async def restart(self, timeout: float) -> None:
        """Stop the session unit (and with it every command unit: ``PartOf=``), then start it; both waited for."""
        deadline = time.monotonic() + timeout
        await self.check_unit()
        for member in ("StopUnit", "StartUnit"):
            result = await self._job(member, "ss", [self.unit, "replace"], deadline)
            if result != "done":
                raise SessionError(f"seat {self.seat!r}: systemd's {member} of its session unit {self.unit!r} "
                                   f"ended {result!r}", seat=self.seat, unit=self.unit, result=result)

    async def _isolated(self, home: str, kept: Sequence[tuple[str, bool]]) -> list[tuple[str, Variant]]:
        """The command unit's settings for the seat's isolation: ``home`` is the seat's home on the host, ``kept``
        what it needs from under its private places, the home too if it is there, bound in at their own paths
        (cud.daemon.session.namespace.kept_from_host)."""
        isolation = self.isolation
        settings: list[tuple[str, Variant]] = []
        binds: list[tuple[str, str, bool, int]] = []
        read_only: list[tuple[str, str, bool, int]] = []
        if not self._checked:  # a command before the first reset
            await self.check_unit()
        if isolation.private_tmp or isolation.network == "none":
            # The session unit's: every command of one session shares them, and the reset (stopping the session
            # unit, and so every command unit) lets systemd remove them. Both units must have the setting.
            settings.append(("JoinsNamespaceOf", Variant("as", [self.unit])))
        if isolation.private_tmp:
            settings.append(("PrivateTmp", Variant("b", True)))
            binds += [(source, target, False, _MS_REC) for target, source in self._shared.items()]
            for path, only_read in kept:  # what lies under /tmp on the host and the session needs (the X socket...)
                (read_only if only_read else binds).append((path, path, False, _MS_REC))
        if isolation.network == "none":
            settings.append(("PrivateNetwork", Variant("b", True)))
        if isolation.home_path is not None:
            # /home is a tmpfs of the command's own holding the seat's home alone (systemd resolves a bind's source on
            # the host, so a home under /home or /tmp is still found).
            settings.append(("TemporaryFileSystem", Variant("a(ss)", [("/home", "mode=0755")])))
            binds.append((home, isolation.home_path, False, _MS_REC))
        if binds:
            settings.append(("BindPaths", Variant("a(ssbt)", binds)))
        if read_only:
            settings.append(("BindReadOnlyPaths", Variant("a(ssbt)", read_only)))
        return settings

    async def start(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str, stdin: int, stdout: int,
                    stderr: int, timeout: float = 10.0, home: str = "/",
                    kept: Sequence[tuple[str, bool]] = ()) -> CommandUnit:
        """Start ``argv`` as a transient unit of the session; its stdio are these file descriptors. ``cwd`` is as
        the session sees it; ``home`` (the seat's, on the host) and ``kept`` serve its isolation (:meth:`_isolated`)."""
        name = f"{COMMAND_UNIT_PREFIX}{secrets.token_hex(8)}.service"
        properties = [
            ("Description", Variant("s", f"cud seat {self.seat}: {argv[0]}"[:200])),
            ("Type", Variant("s", "exec")),
            ("RemainAfterExit", Variant("b", True)),
            ("ExecStart", Variant("a(sasb)", [(argv[0], list(argv), False)])),
            ("User", Variant("s", self.user)),
            ("WorkingDirectory", Variant("s", cwd)),
            ("Environment", Variant("as", [f"{k}={v}" for k, v in env.items()])),
            ("StandardInputFileDescriptor", Variant("h", 0)),
            ("StandardOutputFileDescriptor", Variant("h", 1)),
            ("StandardErrorFileDescriptor", Variant("h", 2)),
            ("PartOf", Variant("as", [self.unit])),
            ("Requisite", Variant("as", [self.unit])),
            ("After", Variant("as", [self.unit])),
            ("KillSignal", Variant("i", signal.SIGKILL)),
            *(await self._isolated(home, kept) if self.isolation.namespaced else []),
        ]
        result = await self._job("StartTransientUnit", "ssa(sv)a(sa(sv))", [name, "fail", properties, []],
                                 time.monotonic() + timeout, unix_fds=[stdin, stdout, stderr])
        try:
            (path,) = await self._call(_MANAGER_PATH, _MANAGER, "GetUnit", "s", [name])
        except SessionError:
            if result == "done":
                raise
            # Never ran, so already collected: Requisite= found the session unit inactive ('dependency').
            raise SessionError(f"command {argv[0]!r} did not start on seat {self.seat!r}: systemd's job ended "
                               f"{result!r}; is {self.unit!r} active?", seat=self.seat, argv=list(argv[:1])) from None
        command = CommandUnit(self, name, path)
        if result == "done":
            return command
        status = int(await self._get(path, _SERVICE, "ExecMainStatus"))
        if result == "failed" and not _SPAWN_FAILED.start <= status < _SPAWN_FAILED.stop:
            return command  # it ran, and ended (with a failure) before systemd finished the job: wait() tells
        with contextlib.suppress(SessionError):
            await self._call(_MANAGER_PATH, _MANAGER, "ResetFailedUnit", "s", [name])
        why = (f"systemd could not start it (exit status {status}: see systemd.exec(5), 'Process Exit Codes')"
               if result == "failed" else f"systemd's job ended {result!r}; is {self.unit!r} active?")
        raise SessionError(f"command {argv[0]!r} did not start on seat {self.seat!r}: {why}", seat=self.seat,
                           argv=list(argv[:1]), status=status)
        return command

    def close(self) -> None:
        if self._bus is not None:
            self._bus.disconnect()
            self._bus = None
