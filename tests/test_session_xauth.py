"""One X cookie per display: a seat's user opens its own display, never another seat's (docs/sessions.md).

One daemon with three seats, each with its own user: two on Xvfb servers and one VNC seat on an
Xvnc (its ``x_display`` the Xvnc's), each server taking only its own cookie; the daemon's
XAUTHORITY holds all three (as /run/cud-display/Xauthority does under systemd). A seat's user who
opened its display's door (``xhost``) finds it shut again after the reset.
"""

from __future__ import annotations

import base64
import pwd
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cud.daemon.session.xauth import XauthEntry, display_number, encode, entries_for, parse
from cud.daemon.session.xclients import session_clients
from cud.errors import SessionError
from cud.scripted import ScriptedModel

from .support.daemon import Daemon, scenario
from .support.seat_users import SeatUsers, make_home
from .support.vnc import start_xvnc
from .support.xserver import start_xvfb, stop_process

COOKIE = b"MIT-MAGIC-COOKIE-1"
LOCAL, WILD = 256, 0xFFFF


def cookie_entries(number: bytes, cookie: bytes) -> list[XauthEntry]:
    """A display's FamilyLocal entry (what python-xlib matches) and its FamilyWild one (libX11's fallback)."""
    return [XauthEntry(LOCAL, socket.gethostname().encode(), number, COOKIE, cookie),
            XauthEntry(WILD, b"", number, COOKIE, cookie)]


# -- the parser --------------------------------------------------------------------------------


def test_the_parser_reads_what_xauth_writes_and_encode_writes_it_back(tmp_path: Path) -> None:
    path = tmp_path / "auth"
    path.touch()
    cookies = {n: secrets.token_hex(16) for n in ("3", "12")}
    script = "".join(f"add :{n} MIT-MAGIC-COOKIE-1 {c}\n" for n, c in cookies.items())
    subprocess.run(["xauth", "-q", "-i", "-f", str(path), "source", "-"], input=script.encode(), check=True)
    blob = path.read_bytes()
    entries = parse(blob)
    assert {(e.number.decode(), e.data.hex()) for e in entries} == set(cookies.items())
    assert all(e.name == COOKIE for e in entries)
    assert encode(entries) == blob
    assert [e.number for e in entries_for(entries, ":12.0")] == [b"12"]
    assert [e.number for e in entries_for(entries, "unix:3")] == [b"3"]
    assert entries_for(entries, ":4") == []  # another display's cookie is never a stand-in


def test_entries_for_any_display_serve_only_when_the_file_has_none_for_this_one() -> None:
    anyone = XauthEntry(WILD, b"", b"", COOKIE, b"w" * 16)
    three = cookie_entries(b"3", b"3" * 16)
    assert entries_for([anyone], ":7") == [anyone]  # a lone display's file may hold just that
    assert entries_for([anyone, *three], ":3") == three


@pytest.mark.parametrize("blob", [b"\x01", b"\x01\x00\x00\x05ab", encode(cookie_entries(b"1", b"k" * 16))[:-3]])
def test_a_cut_file_is_a_session_error_naming_it(blob: bytes) -> None:
    with pytest.raises(SessionError, match="the file 'x' is cut short"):
        parse(blob, source="the file 'x'")


@pytest.mark.parametrize("display", ["", "host", ":", ":x", "host:.0"])
def test_a_display_without_a_number_is_refused_by_name(display: str) -> None:
    with pytest.raises(SessionError, match=f"X display {display!r}"):
        display_number(display)


# -- three seats ------------------------------------------------------------------------------------


@dataclass
class Seats:
    daemon: Daemon
    #: Each seat's X display (the VNC seat's: its x_display).
    displays: dict[str, str]
    #: Each seat's user's name.
    users: dict[str, str]
    #: The daemon's XAUTHORITY (every display's cookie) and an empty cookie file anyone may read.
    everyone: Path
    empty: Path


@pytest.fixture(scope="module")
def seats(seat_users: SeatUsers) -> Iterator[Seats]:
    base = Path(tempfile.mkdtemp(prefix="cud-xauth-", dir="/tmp"))
    base.chmod(0o755)
    model = ScriptedModel(scenario({"message": "done"}))
    url = model.start()
    procs: list[subprocess.Popen[bytes]] = []
    displays: dict[str, str] = {}
    users: dict[str, str] = {}
    daemon = None
    try:
        shared: list[XauthEntry] = []
        tables = []
        for seat in ("s1", "s2", "v3"):
            cookie = secrets.token_bytes(16)
            own = base / f"{seat}.auth"  # the server's own file: its cookie alone
            own.write_bytes(encode(cookie_entries(b"", cookie)))
            own.chmod(0o600)
            (base / seat).mkdir()
            if seat == "v3":
                vnc = start_xvnc(base / seat, width=320, height=240, security_types="VncAuth", auth=own)
                procs.append(vnc.proc)
                (base / seat / "password").write_text(vnc.password)
                (base / seat / "password").chmod(0o600)  # a secret no seat's user may read (config refuses it)
                where = (f'vnc = "{vnc.server}"\nvnc_password_file = "{base / seat / "password"}"\n'
                         f'x_display = "{vnc.display}"')
                display = vnc.display
            else:
                server = start_xvfb(base / seat, width=320, height=240, auth=own)
                procs.append(server.proc)
                display = server.display
                where = f'display = "{display}"'
            displays[seat] = display
            shared += cookie_entries(display_number(display), cookie)
            user = seat_users.make()
            users[seat] = user.name
            tables.append(f'[[seats]]\nname = "{seat}"\n{where}\nuser = "{user.name}"\n'
                          f'home = "{make_home(base / seat, user)}"\n')
        everyone = base / "Xauthority"  # the daemon's: every display's cookie
        everyone.write_bytes(encode(shared))
        everyone.chmod(0o600)
        (base / "daemon").mkdir(mode=0o755)
        daemon = Daemon(":0", url, workdir=base / "daemon", seats={}, config="".join(tables),
                        extra_env={"XAUTHORITY": str(everyone)})
        daemon.start()
        empty = base / "empty.auth"
        empty.touch(mode=0o644)
        yield Seats(daemon, displays, users, everyone, empty)
    finally:
        if daemon is not None:
            daemon.cleanup()
        for proc in procs:
            stop_process(proc)
        model.stop()
        shutil.rmtree(base, ignore_errors=True)


def run_as_seat(seats: Seats, seat: str, *argv: str) -> tuple[int, str]:
    done = seats.daemon.call("exec", seat=seat, argv=list(argv), timeout=30)
    return done["exit_code"], (base64.b64decode(done["stdout"]) + base64.b64decode(done["stderr"])).decode()


def test_a_seats_user_opens_its_own_display_and_not_the_other_seats(seats: Seats) -> None:
    for seat, own in seats.displays.items():
        code, out = run_as_seat(seats, seat, "xdpyinfo", "-display", own)
        assert code == 0 and f"name of display:    {own}" in out, out
        for other, theirs in seats.displays.items():
            if other != seat:
                code, out = run_as_seat(seats, seat, "xdpyinfo", "-display", theirs)
                assert code != 0 and "unable to open display" in out, (seat, other, out)


def test_the_sessions_cookie_file_holds_its_displays_entries_only(seats: Seats) -> None:
    for seat, display in seats.displays.items():
        code, out = run_as_seat(seats, seat, "/bin/sh", "-c", 'stat -c %a:%U "$XAUTHORITY"; xauth -n list')
        assert code == 0, out
        mode, *entries = out.splitlines()
        number = display_number(display).decode()
        assert mode.startswith("600:") and entries, out
        assert all(line.split()[0].endswith(f":{number}") for line in entries), out


def test_the_daemon_itself_still_reaches_every_display(seats: Seats) -> None:
    states = {seat["name"]: seat["state"] for seat in seats.daemon.call("seats")}
    assert states == {"s1": "idle", "s2": "idle", "v3": "idle"}, states


def opens_without_cookie(seats: Seats, seat: str, display: str) -> bool:
    """Whether the seat's user opens ``display`` with no cookie at all (XAUTHORITY an empty file)."""
    code, out = run_as_seat(seats, seat, "env", f"XAUTHORITY={seats.empty}", "xdpyinfo", "-display", display)
    assert code == 0 or "unable to open display" in out, out
    return code == 0


def test_a_door_the_seats_user_opened_with_xhost_is_shut_by_the_reset(seats: Seats,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``xhost +``, ``+si:localuser:OTHER`` and ``+local:`` outlive their client while anything stays connected
    (a window manager, here a stand-in holding a connection): the reset restores access control, and
    disconnects another user who came in meanwhile, without a window, to watch the next task."""
    display = seats.displays["s1"]
    monkeypatch.setenv("XAUTHORITY", str(seats.everyone))
    holder = subprocess.Popen(  # keeps the server from resetting, as a window manager does
        [sys.executable, "-c", "import sys; from Xlib import display; d = display.Display(); sys.stdin.read()"],
        stdin=subprocess.PIPE, env={"DISPLAY": display, "XAUTHORITY": str(seats.everyone)})
    other = pwd.getpwnam(seats.users["s2"])
    watcher = None
    try:
        assert run_as_seat(seats, "s1", "xdpyinfo", "-display", display)[0] == 0  # the holder is connected by now
        assert not opens_without_cookie(seats, "s2", display)  # the door is shut to start with
        code, out = run_as_seat(seats, "s1", "xhost", f"+si:localuser:{seats.users['s2']}")
        assert code == 0, out
        assert opens_without_cookie(seats, "s2", display)  # the attack works: s2's user is in without a cookie
        for door in ("+local:", "+"):
            code, out = run_as_seat(seats, "s1", "xhost", door)
            assert code == 0, out
        assert opens_without_cookie(seats, "s2", display)
        # s2's user stays connected through the door, without a window (xev -root watches the root window).
        watcher = subprocess.Popen(["xev", "-root", "-display", display], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, user=other.pw_uid, group=other.pw_gid,
                                   extra_groups=[], env={"XAUTHORITY": str(seats.empty), "PATH": "/usr/bin:/bin"})
        for _ in range(600):  # a bound, not a measure: the loop ends as soon as xev is connected
            if any(c.pid == watcher.pid for c in session_clients(display, other.pw_uid)):
                break
            assert watcher.poll() is None, "xev could not connect through the open door"
            time.sleep(0.05)
        else:
            pytest.fail("xev never showed up among the display's clients")
        seats.daemon.call("reset", seat="s1")
        assert not opens_without_cookie(seats, "s2", display)
        code, out = run_as_seat(seats, "s1", "xhost")
        assert code == 0 and out.splitlines() == ["access control enabled, only authorized clients can connect"], out
        assert watcher.wait(timeout=30) != 0  # its connection was closed: X's I/O error ends it
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(timeout=30)
