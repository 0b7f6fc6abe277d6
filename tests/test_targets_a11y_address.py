"""A seat's user who owns org.a11y.Bus on the seat's session bus cannot send the daemon to another bus.

One real daemon (tests/support/session_seat.py: openbox on Xvfb, a session bus run by root whose policy lets the
seat's user own any name, as a bus with a launcher of the user's must), and a second accessibility bus run by root
(tests/support/a11y.py, as cud-bus@ runs another seat's) with a GTK dialog on it. A program of the seat's user
owns org.a11y.Bus and answers GetAddress with that other bus: the seat's element checks must say "could not look",
naming the address, and never see the other bus's dialog (before, they read it and passed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cud.cuctl.client import Client
from cud.spec.load import load_spec
from cud.spec.wire import submit_fields
from tests.support.a11y import A11yBus, FormApp, start_shared_a11y_bus, stop_group
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers
from tests.support.session_seat import SYSTEM_PYTHON, SessionSeat, as_seat_user, bus_call, session_seat

#: A program (of the seat's user) that owns org.a11y.Bus and answers GetAddress with argv[1].
_IMPOSTOR = textwrap.dedent("""\
    import sys
    from gi.repository import Gio, GLib
    XML = ('<node><interface name="org.a11y.Bus"><method name="GetAddress">'
           '<arg type="s" direction="out"/></method></interface></node>')
    iface = Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0]
    def call(conn, sender, path, iface_name, method, params, invocation):
        invocation.return_value(GLib.Variant("(s)", (sys.argv[1],)))
    conn = Gio.bus_get_sync(Gio.BusType.SESSION, None)
    conn.register_object("/org/a11y/bus", iface, call, None, None)
    Gio.bus_own_name_on_connection(conn, "org.a11y.Bus", Gio.BusNameOwnerFlags.NONE, None, None)
    GLib.MainLoop().run()
    """)


@dataclass
class Setup:
    seat: SessionSeat
    other: A11yBus
    other_a11y: str  # the other bus's accessibility bus address


@pytest.fixture(scope="module")
def setup(seat_users: SeatUsers) -> Iterator[Setup]:
    base = Path(tempfile.mkdtemp(prefix="cud-a11y-address-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(seat_users.make(), base) as seat:
            other = start_shared_a11y_bus(seat.desktop, [seat.user.name])
            form = FormApp(seat.desktop, other, "gtk")
            try:
                form.start()
                reply = subprocess.run(["dbus-send", f"--bus={other.address}", "--print-reply=literal",
                                        "--dest=org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress"],
                                       capture_output=True, text=True, timeout=30, check=True)
                yield Setup(seat, other, reply.stdout.strip())
            finally:
                form.stop()
                other.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _impostor(seat: SessionSeat, answer: str) -> subprocess.Popen[bytes]:
    script = seat.base / "impostor.py"
    script.write_text(_IMPOSTOR)
    script.chmod(0o644)
    env = {"PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": seat.bus_address}
    proc = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, str(script), answer], env=env,
                            stdin=subprocess.DEVNULL, start_new_session=True)

    def owns() -> bool:
        reply = bus_call(seat.bus_address, "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.a11y.Bus")
        return reply.returncode == 0 and reply.stdout.split()[-1] == str(proc.pid)

    wait_until(owns, 30, "the seat user's program to own org.a11y.Bus")
    return proc


def _element_check(seat: SessionSeat, tmp_path: Path) -> dict[str, object]:
    """The verdict's one check: the other bus's dialog button, looked for on this seat (no reset before it: the
    reset would end the impostor, and start a launcher of the user's in its place)."""
    spec = tmp_path / "spec.toml"
    spec.write_text('prompt = "look"\nreset = false\n[[checks]]\nname = "button"\n'
                    'element = { role = "push button", name = "Delete account" }\n')
    with Client(seat.daemon.socket, timeout=60) as client:
        task = client.call("submit", **submit_fields(*load_spec(spec)))["id"]
        shown = wait_until(lambda: (t := client.call("show", id=task))["verdict"] and t, 120, "the task's verdict")
    (check,) = shown["verdict"]["checks"]
    return check


def _home_link(seat: SessionSeat, target: str) -> str:
    """A link at the home's .cache/at-spi/bus_0 (a place of the seat's) to ``target``: the address naming it."""
    place = seat.home / ".cache" / "at-spi"
    place.mkdir(parents=True, exist_ok=True)
    for made in (place.parent, place):
        os.chown(made, seat.user.uid, seat.user.gid, follow_symlinks=False)
    link = place / "bus_0"
    if link.is_symlink():
        link.unlink()
    link.symlink_to(target)
    return f"unix:path={link}"


@pytest.mark.parametrize("how", ["another seat's bus", "a link under the home to it"])
def test_a_seat_users_a11y_name_cannot_point_the_daemon_at_another_bus(setup: Setup, tmp_path: Path,
                                                                       how: str) -> None:
    seat = setup.seat
    answer = setup.other_a11y
    if how != "another seat's bus":
        # Under the seat's own place, but what listens is root's bus: the listener check refuses it.
        answer = _home_link(seat, answer.removeprefix("unix:path=").split(",")[0])
    impostor = _impostor(seat, answer)
    try:
        check = _element_check(seat, tmp_path)
    finally:
        stop_group(impostor)
    assert check["passed"] is False, check
    why = str(check["why"])
    assert why.startswith("could not look: seat 's1': the accessibility bus address") and answer in why, why
    assert "refused" in why and "Delete account" not in str(check.get("observed")), check


def test_a_launcher_of_the_seat_user_in_its_session_is_still_read(setup: Setup, tmp_path: Path) -> None:
    """The name owned by the user before a reset: the reset starts the user's own launcher, whose bus (in the
    session's runtime directory, listened on by the user) is read: no refusal, and no other bus's dialog."""
    seat = setup.seat
    impostor = _impostor(seat, setup.other_a11y)
    try:
        with Client(seat.daemon.socket, timeout=120) as client:
            client.call("reset", seat="s1")
    finally:
        stop_group(impostor)
    check = _element_check(seat, tmp_path)
    assert check["passed"] is False and check["why"] == "no such element is showing", check


def _request_name(prefix: list[str], address: str, name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, "dbus-send", f"--bus={address}", "--print-reply=literal",
                           "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.RequestName",
                           f"string:{name}", "uint32:0"], capture_output=True, text=True, timeout=30)


def test_cud_bus_policy_lets_no_seat_user_own_org_a11y_bus(setup: Setup) -> None:
    """systemd/cud-session-bus.conf, as cud-bus@ writes it for this seat's user: the user joins the bus and owns
    names, but not org.a11y.Bus, which the launcher (root here, cud-display there) still may own."""
    seat = setup.seat
    where = Path(tempfile.mkdtemp(prefix="policy-", dir=seat.base))  # a path the seat's user can reach
    where.chmod(0o755)
    conf = where / "session-bus.conf"
    conf.write_text((Path(__file__).parents[1] / "systemd" / "cud-session-bus.conf").read_text()
                    .replace("@SEAT_USER@", seat.user.name))
    address = f"unix:path={where / 'bus'}"
    bus = subprocess.Popen(["dbus-daemon", f"--config-file={conf}", f"--address={address}", "--nofork",
                            "--nopidfile"], stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True, umask=0)  # keep_umask: a socket anyone may connect to
    try:
        wait_until(lambda: (where / "bus").exists(), 30, "the bus to listen")
        user = as_seat_user(seat)
        refused = _request_name(user, address, "org.a11y.Bus")
        assert refused.returncode != 0 and "AccessDenied" in refused.stderr, refused
        assert _request_name(user, address, "org.cud.AnyOther").returncode == 0
        assert _request_name([], address, "org.a11y.Bus").returncode == 0
    finally:
        stop_group(bus)
