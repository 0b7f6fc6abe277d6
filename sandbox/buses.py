"""Each seat's session bus and accessibility bus, and the environment that puts applications on them.

The session bus runs as the sandbox's own user, as cud-bus@ runs it as ``cud-display``, and
lets the seat's user (seat_sessions.py) in, who can then put the session's applications on
it: a seat's reset ends every process of the seat's user (docs/sessions.md), and refuses a
seat whose bus is one of them; nor can the seat's user end a bus of another user, or listen
at its address, as its socket's directory is the sandbox's (:func:`session_argv`). The
accessibility launcher runs as the sandbox's own user too, so that the reset leaves it
(:func:`a11y_argv`). Every seat has its own D-Bus session bus (a ``dbus-daemon`` of type session) listening on
a socket file in the sandbox directory (``session/bus``, or ``seatK.session/bus``): never an
abstract socket, which any process on the machine could reach and which two seats
could mix up. Under it runs at-spi2-core's ``at-spi-bus-launcher``: it starts the
accessibility bus (a second dbus-daemon, its child, stopped with it) and answers
``org.a11y.Bus.GetAddress`` on the session bus, which is how GTK, Qt and the daemon
find that bus. The registry (``at-spi2-registryd``) is started on demand by the
accessibility bus and leaves when the session bus does.

The session bus starts no services itself (no D-Bus activation: its config,
``session-bus.conf`` beside its socket, names no service directory). Otherwise,
between a launcher's end (its X server died) and the next, the first to ask for
``org.a11y.Bus`` would start a launcher nobody recorded, outside the sandbox
directory, and the recorded one could then not own the name. The launcher also
sets ``AT_SPI_BUS`` on the seat's X root window (why ``a11y-bus`` needs the X
server); applications are still given the session bus, the way every toolkit
finds the accessibility bus.

Standard library only, like the rest of the sandbox; the probes use ``dbus-send``.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Mapping
from pathlib import Path

from leftovers import fresh_dir
from parts import Settings
from procs import Record, SandboxError
from seat_sessions import SeatSession

__all__ = ("A11Y_ENV", "LAUNCHER", "a11y_answers", "a11y_argv", "app_env", "check_socket_paths", "session_answers",
           "session_argv")

LAUNCHER = "/usr/libexec/at-spi-bus-launcher"
#: Where at-spi-bus-launcher reads its bus's config (accessibility.conf) from.
A11Y_DEFAULTS = Path("/usr/share/defaults/at-spi2")
#: What makes toolkits expose their trees (GTK 3 does by default, through libatk-adaptor).
A11Y_ENV = {"QT_ACCESSIBILITY": "1", "QT_LINUX_ACCESSIBILITY_ALWAYS_ON": "1"}
#: Environment that would hide an application from the bus, or point it at another session's.
_UNSET = ("NO_AT_BRIDGE", "DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS")
#: sun_path holds 108 bytes, with its terminating NUL.
_MAX_SOCKET_PATH = 107


def socket_path(settings: Settings, prefix: str) -> Path:
    """The session bus's socket, in a directory of the sandbox's (who runs the bus) that the seat's user cannot
    write: the user can neither remove the socket nor listen there itself."""
    return settings.path(f"{prefix}session") / "bus"


def check_socket_paths(settings: Settings) -> None:
    """Refuse, before anything starts, a sandbox directory its seats' bus sockets cannot be put in.

    at-spi-bus-launcher writes ``$XDG_RUNTIME_DIR`` into the accessibility bus's
    address as it is, unescaped: a space, comma, colon, percent sign... in the
    directory's path would make another address of it.
    """
    awkward = sorted({char for char in str(settings.dir) if not (char.isascii() and ord(char) in _PLAIN)})
    if awkward:
        raise SandboxError(f"SANDBOX_DIR {str(settings.dir)!r} holds {''.join(awkward)!r}: at-spi-bus-launcher "
                           "cannot put such a path in the accessibility bus's address; choose a directory "
                           "whose path has only letters, digits and - _ . /")
    for seat in settings.seat_list:
        # The longest: the accessibility bus's, "<dir>/seatK.a11y/at-spi/bus_NNNN".
        path = settings.path(f"{seat.prefix}a11y") / "at-spi" / "bus_1000"
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH:
            raise SandboxError(f"SANDBOX_DIR {str(settings.dir)!r} is too long for the buses' sockets under it "
                               f"({str(path)!r} is over the {_MAX_SOCKET_PATH} bytes a Unix socket path may "
                               "have): choose a shorter directory")


#: dbus-daemon's session configuration (/usr/share/dbus-1/session.conf) without its service
#: directories and includes: everyone may talk and own names, nothing is started on demand.
_SESSION_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- Written by the sandbox (sandbox/buses.py): a seat's session bus, without D-Bus activation. -->
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>{address}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="{daemon_user}"/>
    <allow user="{seat_user}"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  {deny}
</busconfig>
"""
#: The seat's user may not own org.a11y.Bus (as systemd/cud-session-bus.conf): its owner tells the daemon where
#: the accessibility bus is, and the sandbox's launcher is to be the only one to tell it.
_DENY_A11Y = '<policy user="{seat_user}"><deny own="org.a11y.Bus"/></policy>'


#: What a D-Bus address value may hold unescaped (the D-Bus specification, "Server Addresses"),
#: less "\\" and "*", which the spec allows but dbus-fast (the daemon's reader) refuses.
_PLAIN = frozenset(b"-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_/.")


def _escape(value: bytes) -> str:
    return "".join(chr(byte) if byte in _PLAIN else f"%{byte:02x}" for byte in value)


def session_argv(settings: Settings, prefix: str, session: SeatSession) -> tuple[list[str], str]:
    """How a seat's session bus starts (as the sandbox's user: see the module's text), and its address; a stale
    socket of a dead bus goes.

    The daemon and the sandbox's own parts (the demo app) run as the sandbox's user, and
    the seat's user is let in.
    """
    path = socket_path(settings, prefix)
    # Made afresh, the sandbox's: whatever an earlier run left there (a dead bus's socket), whoever owns it now.
    fresh_dir(settings, path.parent.name)
    address = f"unix:path={_escape(os.fsencode(path))}"  # also nothing left that XML would need escaped
    conf = settings.path(f"{prefix}session-bus.conf")
    daemon_user = pwd.getpwuid(os.geteuid()).pw_name
    # A seat whose user is the sandbox's own runs its launcher as that user (a11y_argv): it must own the name.
    deny = "" if session.uid == os.geteuid() else _DENY_A11Y.format(seat_user=session.user)
    conf.write_text(_SESSION_CONF.format(address=address, daemon_user=daemon_user, seat_user=session.user,
                                         deny=deny))
    return ["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile"], address


def a11y_argv(settings: Settings, prefix: str, session: SeatSession) -> tuple[list[str], dict[str, str]]:
    """How a seat's accessibility bus starts, and what its launcher's environment adds.

    The launcher runs as the sandbox's own user, not the seat's: a reset ends every process
    of the seat's user (docs/sessions.md), and the recorded launcher must outlive it. Its
    bus's config admits the seat's user too: at-spi-bus-launcher reads that config from a
    fixed path, so as root it runs in a mount namespace of its own where that path holds
    the sandbox's (what cud-bus@ does with BindReadOnlyPaths). As another user the seat's
    user is the sandbox's own, whose reset ends only the session's marked processes.

    The launcher puts the accessibility bus's socket under ``$XDG_RUNTIME_DIR/at-spi/``:
    a directory of the sandbox's own, so that it is neither the user's session's nor
    another seat's, and one the seat's applications can reach.
    """
    # Made afresh, the sandbox's (leftovers.py): an earlier run's at-spi/ or dconf/, owned by a uid that a removed
    # seat user left to someone else, would keep the launcher from binding its socket there.
    runtime = fresh_dir(settings, f"{prefix}a11y")
    (runtime / "at-spi").mkdir(mode=0o755)
    extra = {"XDG_RUNTIME_DIR": str(runtime)}
    if session.uid == os.geteuid():
        return [LAUNCHER, "--launch-immediately"], extra
    conf = fresh_dir(settings, f"{prefix}a11y-conf")
    allow = "".join(f'<allow user="{name}"/>' for name in (pwd.getpwuid(os.geteuid()).pw_name, session.user))
    text = (A11Y_DEFAULTS / "accessibility.conf").read_text()
    (conf / "accessibility.conf").write_text(text.replace('<allow user="root"/>', allow, 1))
    script = f'mount --bind "$1" {A11Y_DEFAULTS} && exec {LAUNCHER} --launch-immediately'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", str(conf)], extra


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
    """This launcher owns org.a11y.Bus on the seat's session bus, and the registry answers on the bus it names."""
    if session is None:
        return False
    owner = _call(session.info["address"], "org.freedesktop.DBus", "/org/freedesktop/DBus",
                  "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.a11y.Bus")
    if owner is None or owner.split()[-1] != str(record.pid):
        return False
    address = a11y_address(session)
    if address is None or address != record.info.get("address", address):
        return False
    record.info["address"] = address
    reply = _call(address, "org.a11y.atspi.Registry", "/org/a11y/atspi/accessible/root",
                  "org.freedesktop.DBus.Properties.Get", "string:org.a11y.atspi.Accessible", "string:ChildCount")
    return reply is not None
