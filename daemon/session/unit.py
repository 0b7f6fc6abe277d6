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

    def __init__(self, seat: str, unit: str, user: str, *, bus_address: str | None = None) -> None:
        self.seat = seat
        self.unit = unit
        self.user = user
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
    async def check_user(self) -> None:
        """Refuse a unit that does not run as the seat's user (it would not be the seat's session)."""
        (path,) = await self._call(_MANAGER_PATH, _MANAGER, "LoadUnit", "s", [self.unit])
        state = await self._get(path, _UNIT, "LoadState")
        if state != "loaded":
            raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} is {state} in systemd "
                               "(is it installed? see docs/systemd.md)", seat=self.seat, unit=self.unit)
        user = await self._get(path, _SERVICE, "User")
        if user != self.user:
            raise SessionError(f"seat {self.seat!r}: its session unit {self.unit!r} runs as User={user or 'root'!s}, "
                               f"not the seat's user {self.user!r}; not using it", seat=self.seat, unit=self.unit)

    async def restart(self, timeout: float) -> None:
        """Stop the session unit (and with it every command unit: ``PartOf=``), then start it; both waited for."""
        deadline = time.monotonic() + timeout
        await self.check_user()
        for member in ("StopUnit", "StartUnit"):
            result = await self._job(member, "ss", [self.unit, "replace"], deadline)
            if result != "done":
                raise SessionError(f"seat {self.seat!r}: systemd's {member} of its session unit {self.unit!r} "
                                   f"ended {result!r}", seat=self.seat, unit=self.unit, result=result)

    async def start(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str, stdin: int, stdout: int,
                    stderr: int, timeout: float = 10.0) -> CommandUnit:
        """Start ``argv`` as a transient unit of the session; its stdio are these file descriptors."""
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
