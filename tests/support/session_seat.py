"""A real daemon with one seat that has a session: openbox on Xvfb, a session bus, a home.

Laid out in a directory every seat user can reach::

    base/template/   what the home resets to: files, modes, symlinks, an empty dir (root's: no seat user may
                     change it, and no FIFO or device: docs/sessions.md)
    base/home/       the seat's home (its user's)
    base/sentinel/   beside the home: a reset must never touch it (its tree hash is checked)
    base/bus/        the seat's session bus, run by root (the tests' user) as cud-bus@ runs it as cud-display,
                     admitting the seat's user, its socket in this directory of root's (0755) that the
                     seat's user cannot write: a reset ends every process of the seat's user, and the user
                     can neither end the bus nor listen at its address. It may activate one service
                     (org.cud.SessionTest, a GTK Python program), which then runs as root: a bus daemon's
                     child the reset ends. ``bus_as_seat_user``: run by the seat's user instead, in a
                     directory of theirs (the setup the daemon refuses: docs/sessions.md)
    base/daemon/     the daemon's socket and state

Everything is stopped by pid at the end.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cud.daemon.session.user import SeatUser
from cud.scripted import ScriptedModel

from .daemon import Daemon, scenario
from .desktop import Desktop, start_desktop
from .recorder import wait_until
from .seat_users import make_home
from .xserver import stop_process

__all__ = ("SEAT", "TAKEOVER", "SeatParts", "SessionSeat", "alive", "as_seat_user", "bus_call", "listening",
           "seat_parts", "session_seat")

SEAT = "s1"
#: Debian's Python, with python3-gi: what the activatable service runs on.
SYSTEM_PYTHON = "/usr/bin/python3"
_OWN_NAME = """\
from gi.repository import Gio, GLib
Gio.bus_own_name(Gio.BusType.SESSION, "org.cud.SessionTest", Gio.BusNameOwnerFlags.NONE, None, None, None)
GLib.MainLoop().run()
"""
#: The seat's session bus. It looks like the sandbox's (sandbox/buses.py) and differs on purpose:
#: it names a service directory (these tests activate org.cud.SessionTest; the sandbox's bus must
#: activate nothing). Root (the tests' daemon) and the seat's user are let in. The sandbox's scripts
#: are standard-library programs that import their neighbours as top-level modules, so sharing the
#: text would tie the test support to their import path for a dozen lines of XML.
_BUS_CONF = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{services}</servicedir>
  <policy context="default">
    <allow user="root"/>
    <allow user="{user}"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


@dataclass
class SessionSeat:
    base: Path
    user: SeatUser
    desktop: Desktop
    daemon: Daemon
    bus: subprocess.Popen[bytes]
    bus_address: str

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def template(self) -> Path:
        return self.base / "template"

    @property
    def sentinel(self) -> Path:
        return self.base / "sentinel"


def bus_call(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["dbus-send", f"--bus={address}", "--print-reply=literal", "--reply-timeout=5000",
                           "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", *args],
                          capture_output=True, text=True, timeout=15)


#: What the seat's user tries against the seat's session bus: end its daemon, move its socket away, listen at its
#: address. Prints what each attempt gave; a listener it got stays (the "bus" a sweep sparing it would keep), unless
#: given ``--exit``.
TAKEOVER = textwrap.dedent("""\
    import json, os, signal, socket, sys
    bus, path = int(sys.argv[1]), sys.argv[2]
    tried = {}
    def attempt(what, act):
        try:
            act()
            tried[what] = "done"
        except OSError as exc:
            tried[what] = exc.strerror
    attempt("kill", lambda: os.kill(bus, signal.SIGKILL))
    attempt("rename", lambda: os.rename(path, path + ".old"))
    attempt("unlink", lambda: os.unlink(path))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    attempt("listen", lambda: (listener.bind(path), listener.listen()))
    print(json.dumps(tried), flush=True)
    if tried["listen"] == "done" and "--exit" not in sys.argv:
        signal.pause()
    """)


def as_seat_user(seat: SessionSeat) -> list[str]:
    """The prefix that runs a command as the seat's user (nothing when that is us)."""
    user = seat.user
    return [] if user.is_self else ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False


def listening(address: str) -> tuple[int, int]:
    """(pid, uid) of the process the kernel names as listening at the bus ``address`` (SO_PEERCRED)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(address.removeprefix("unix:path="))
        pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def _template(path: Path) -> None:
    (path / "Desktop").mkdir(parents=True)
    (path / "Desktop" / "notes.txt").write_text("first line\n")
    (path / "bin").mkdir()
    (path / "bin" / "hello.sh").write_text("#!/bin/sh\necho hello\n")
    (path / "bin" / "hello.sh").chmod(0o755)
    (path / "Documents").mkdir(mode=0o700)
    (path / "Documents").chmod(0o700)
    (path / "notes").symlink_to("Desktop/notes.txt")
    (path / "dangling").symlink_to("nowhere/at/all")
    (path / "ü 日本").write_bytes(b"\x00\xff" * 100)
    # 0700: a reset leaves the home 0700 whatever the template's mode (test_session_reset.py tries 0755), and the
    # tests' tree hashes compare the home's own mode with the template's.
    path.chmod(0o700)


def _sentinel(path: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("never touched by a reset\n")
    (path / "link_to_home").symlink_to("../home")


@dataclass
class SeatParts:
    """One seat's own pieces under ``base``: its desktop, its session bus, and its ``[[seats]]`` table."""

    desktop: Desktop
    bus: subprocess.Popen[bytes]
    bus_address: str
    table: str


@contextlib.contextmanager
def seat_parts(name: str, user: SeatUser, base: Path, bus_as_seat_user: bool = False,
               home_files: dict[str, str] | None = None) -> Iterator[SeatParts]:
    """A seat's template, home, sentinel, session bus and desktop under ``base`` (0755), stopped by pid on exit."""
    _template(base / "template")
    home = make_home(base, user)
    for file_name, text in (home_files or {}).items():
        (home / file_name).write_text(text)
        if os.geteuid() == 0:
            os.chown(home / file_name, user.uid, user.gid)
    _sentinel(base / "sentinel")
    bus_dir = base / "bus"
    (bus_dir / "services").mkdir(parents=True)
    bus_dir.chmod(0o755)
    (bus_dir / "own_name.py").write_text(_OWN_NAME)
    (bus_dir / "services" / "org.cud.SessionTest.service").write_text(textwrap.dedent(f"""\
        [D-BUS Service]
        Name=org.cud.SessionTest
        Exec={SYSTEM_PYTHON} {bus_dir / 'own_name.py'}
        """))
    (bus_dir / "bus.conf").write_text(_BUS_CONF.format(socket=bus_dir / "socket", services=bus_dir / "services",
                                                       user=user.name))
    as_user = bus_as_seat_user and not user.is_self
    if as_user:
        os.chown(bus_dir, user.uid, user.gid)
    address = f"unix:path={bus_dir / 'socket'}"
    with start_desktop("x11", base) as desktop:
        become = [] if not as_user else ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups"]
        bus = subprocess.Popen([*become, "dbus-daemon", f"--config-file={bus_dir / 'bus.conf'}", "--nofork",
                                "--nopidfile"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_until(lambda: bus_call(address, "org.freedesktop.DBus.GetId").returncode == 0, 30,
                       "the seat's session bus to answer")
            table = textwrap.dedent(f"""\
                [[seats]]
                name = "{name}"
                display = "{desktop.display}"
                session_bus = "{address}"
                user = "{user.name}"
                home = "{base / 'home'}"
                home_template = "{base / 'template'}"
                """)
            yield SeatParts(desktop, bus, address, table)
        finally:
            stop_process(bus)


@contextlib.contextmanager
def session_seat(user: SeatUser, base: Path, config: str = "", env: dict[str, str] | None = None,
                 bus_as_seat_user: bool = False, home_files: dict[str, str] | None = None) -> Iterator[SessionSeat]:
    """The seat ``s1`` with ``user``'s session under ``base`` (0755), its daemon, bus and desktop; ``config``
    is added to the daemon's config file (right after the seat's table: bare keys are the seat's; more
    ``[[seats]]`` tables, from :func:`seat_parts`, are more seats), ``env`` to the daemon's environment;
    ``bus_as_seat_user``: the bus is run by the seat's user (see the module's text); ``home_files``: files
    (name: text) already in the home when the daemon starts, the user's."""
    daemon_dir = base / "daemon"
    model = ScriptedModel(scenario({"message": "done"}))
    url = model.start()
    try:
        with seat_parts(SEAT, user, base, bus_as_seat_user, home_files) as parts:
            daemon_dir.mkdir(mode=0o755)
            daemon = Daemon(parts.desktop.display, url, workdir=daemon_dir, seats={}, config=parts.table + config,
                            extra_env=env)
            try:
                daemon.start()
                yield SessionSeat(base, user, parts.desktop, daemon, parts.bus, parts.bus_address)
            finally:
                daemon.cleanup()
    finally:
        model.stop()


def windows(display: str) -> list[Any]:
    """The windows the window manager manages now (_NET_CLIENT_LIST)."""
    from Xlib.display import Display

    conn = Display(display)
    try:
        prop = conn.screen().root.get_full_property(conn.intern_atom("_NET_CLIENT_LIST"), 0)
        return list(prop.value) if prop is not None else []
    finally:
        conn.close()
