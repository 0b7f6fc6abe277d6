"""Each seat's session bus and accessibility bus, and the environment that puts applications on them.

Every seat has its own D-Bus session bus (``dbus-daemon --session``) listening on
a socket file in the sandbox directory (``bus``, or ``seatK.bus``): never an
abstract socket, which any process on the machine could reach and which two seats
could mix up. Under it runs at-spi2-core's ``at-spi-bus-launcher``: it starts the
accessibility bus (a second dbus-daemon, its child, stopped with it) and answers
``org.a11y.Bus.GetAddress`` on the session bus, which is how GTK, Qt and the daemon
find that bus. The registry (``at-spi2-registryd``) is started on demand by the
accessibility bus and leaves when the session bus does. The launcher also sets
``AT_SPI_BUS`` on the seat's X root window, so applications started with only
``DISPLAY`` find the accessibility bus too.

Standard library only, like the rest of the sandbox; the probes use ``dbus-send``.
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

from parts import Settings
from procs import Record, SandboxError

__all__ = ("LAUNCHER", "A11Y_ENV", "a11y_answers", "a11y_argv", "app_env", "session_answers", "session_argv")

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
#: What makes toolkits expose their trees (GTK 3 does by default, through libatk-adaptor).
A11Y_ENV = {"QT_ACCESSIBILITY": "1", "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1"}
#: Environment that would hide an application from the bus, or point it at another session's.
_UNSET = ("NO_AT_BRIDGE", "DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS")
#: sun_path holds 108 bytes, with its terminating NUL.
_MAX_SOCKET_PATH = 107


def socket_path(settings: Settings, prefix: str) -> Path:
    return settings.path(f"{prefix}bus")


def session_argv(settings: Settings, prefix: str) -> tuple[list[str], str]:
    """How a seat's session bus starts, and its address; a stale socket file of a dead bus is removed."""
    path = socket_path(settings, prefix)
    if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
        raise SandboxError(f"the session bus's socket {str(path)!r} is longer than a Unix socket path may be "
                           f"({_MAX_SOCKET_PATH} bytes): set SANDBOX_DIR to a shorter directory")
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()  # the previous bus died without removing it (we hold the sandbox's lock)
    except FileNotFoundError:
        pass
    address = f"unix:path={path}"
    return ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"], address


def a11y_argv(settings: Settings, prefix: str) -> tuple[list[str], dict[str, str]]:
    """How a seat's accessibility bus starts, and what its launcher's environment adds.

    The launcher puts the accessibility bus's socket under ``$XDG_RUNTIME_DIR/at-spi/``:
    a directory of the sandbox's own, so that it is neither the user's session's nor
    another seat's.
    """
    runtime = settings.path(f"{prefix}a11y")
    runtime.mkdir(mode=0o700, exist_ok=True)
    return [LAUNCHER, "--launch-immediately"], {"XDG_RUNTIME_DIR": str(runtime)}


def app_env(env: Mapping[str, str], session: Record | None) -> dict[str, str]:
    """``env`` for something started on a seat: its session bus (``session``'s record) and accessibility on."""
    out = {k: v for k, v in env.items() if k not in _UNSET}
    if session is not None:
        out["DBUS_SESSION_BUS_ADDRESS"] = session.info["address"]
        out.update(A11Y_ENV)
    return out


def _call(address: str, dest: str, path: str, method: str, *args: str) -> str | None:
    """``dbus-send``'s literal reply, or None when the call fails (no bus, no such name, no answer in 5 s)."""
    try:
        result = subprocess.run(
            ["dbus-send", f"--bus={address}", "--print-reply=literal", "--reply-timeout=5000", f"--dest={dest}",
             path, method, *args],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def session_answers(record: Record) -> bool:
    return _call(record.info["address"], "org.freedesktop.DBus", "/org/freedesktop/DBus",
                 "org.freedesktop.DBus.GetId") is not None


def a11y_address(session: Record) -> str | None:
    """The accessibility bus's address, as applications ask for it on the seat's session bus."""
    return _call(session.info["address"], "org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress") or None


def a11y_answers(record: Record, session: Record | None) -> bool:
    """The launcher owns org.a11y.Bus on the seat's session bus and the registry answers on the bus it names."""
    if session is None:
        return False
    address = a11y_address(session)
    if address is None or address != record.info.get("address", address):
        return False
    record.info["address"] = address
    reply = _call(address, "org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                  "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible", "string:ChildCount")
    return reply is not None
