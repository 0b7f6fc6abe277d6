"""A real daemon with one seat that has a session: openbox on Xvfb, a session bus of the seat's user, a home.

Laid out in a directory every seat user can reach::

    base/template/   what the home resets to: files, modes, symlinks, an empty dir (root's: no seat user may
                     change it, and no FIFO or device: docs/sessions.md)
    base/home/       the seat's home (its user's)
    base/sentinel/   beside the home: a reset must never touch it (its tree hash is checked)
    base/bus/        the seat's session bus (run as the seat's user, like the sandbox's), which
                     may activate one service: org.cud.SessionTest, a GTK Python program
    base/daemon/     the daemon's socket and state

Everything is stopped by pid at the end.
"""

from __future__ import annotations

import contextlib
import os
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

__all__ = ("SEAT", "SessionSeat", "bus_call", "session_seat")

SEAT = "s1"
#: Debian's Python, with python3-gi: what the activatable service runs on.
SYSTEM_PYTHON = "/usr/bin/python3"
_OWN_NAME = """\
from gi.repository import Gio, GLib
Gio.bus_own_name(Gio.BusType.SESSION, "org.cud.SessionTest", Gio.BusNameOwnerFlags.NONE, None, None, None)
GLib.MainLoop().run()
"""
#: The seat's session bus. It looks like the sandbox's (sandbox/buses.py) and differs on purpose:
#: it names a service directory (these tests activate org.cud.SessionTest as the seat's user; the
#: sandbox's bus must activate nothing) and lets root in (the tests' daemon). The sandbox's scripts
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
    path.chmod(0o750)


def _sentinel(path: Path) -> None:
    path.mkdir()
    (path / "keep.txt").write_text("never touched by a reset\n")
    (path / "link_to_home").symlink_to("../home")


@contextlib.contextmanager
def session_seat(user: SeatUser, base: Path, config: str = "",
                 env: dict[str, str] | None = None) -> Iterator[SessionSeat]:
    """The seat ``s1`` with ``user``'s session under ``base`` (0755), its daemon, bus and desktop; ``config``
    is added to the daemon's config file (right after the seat's table: bare keys are the seat's), ``env`` to
    the daemon's environment."""
    _template(base / "template")
    make_home(base, user)
    _sentinel(base / "sentinel")
    bus_dir = base / "bus"
    (bus_dir / "services").mkdir(parents=True)
    (bus_dir / "own_name.py").write_text(_OWN_NAME)
    (bus_dir / "services" / "org.cud.SessionTest.service").write_text(textwrap.dedent(f"""\
        [D-BUS Service]
        Name=org.cud.SessionTest
        Exec={SYSTEM_PYTHON} {bus_dir / 'own_name.py'}
        """))
    (bus_dir / "bus.conf").write_text(_BUS_CONF.format(socket=bus_dir / "socket", services=bus_dir / "services"))
    if os.geteuid() == 0:
        os.chown(bus_dir, user.uid, user.gid)
    address = f"unix:path={bus_dir / 'socket'}"
    daemon_dir = base / "daemon"
    daemon_dir.mkdir(mode=0o755)
    model = ScriptedModel(scenario({"message": "done"}))
    url = model.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with start_desktop("x11", base) as desktop:
            become = [] if user.is_self else ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}",
                                              "--clear-groups"]
            bus = subprocess.Popen([*become, "dbus-daemon", f"--config-file={bus_dir / 'bus.conf'}", "--nofork",
                                    "--nopidfile"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
            procs.append(bus)
            wait_until(lambda: bus_call(address, "org.freedesktop.DBus.GetId").returncode == 0, 30,
                       "the seat's session bus to answer")
            seat_config = textwrap.dedent(f"""\
                [[seats]]
                name = "{SEAT}"
                display = "{desktop.display}"
                session_bus = "{address}"
                user = "{user.name}"
                home = "{base / 'home'}"
                home_template = "{base / 'template'}"
                """)
            daemon = Daemon(desktop.display, url, workdir=daemon_dir, seats={}, config=seat_config + config,
                            extra_env=env)
            try:
                daemon.start()
                yield SessionSeat(base, user, desktop, daemon, bus, address)
            finally:
                daemon.cleanup()
    finally:
        for proc in procs:
            stop_process(proc)
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
