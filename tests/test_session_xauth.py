"""One X cookie per display: a seat's user opens its own display, never another seat's (docs/sessions.md).

One daemon with two seats, each with its own user, on two Xvfb servers that each take only their
own cookie; the daemon's XAUTHORITY holds both (as /run/cud-display/Xauthority does under systemd).
"""

from __future__ import annotations

import base64
import secrets
import shutil
import socket
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cud.daemon.session.xauth import XauthEntry, display_number, encode, entries_for, parse
from cud.errors import SessionError
from cud.scripted import ScriptedModel

from .support.daemon import Daemon, scenario
from .support.seat_users import SeatUsers, make_home
from .support.xserver import XServer, start_xvfb, stop_process

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


# -- two seats ------------------------------------------------------------------------------------


@dataclass
class TwoSeats:
    daemon: Daemon
    servers: dict[str, XServer]


@pytest.fixture(scope="module")
def two_seats(seat_users: SeatUsers) -> Iterator[TwoSeats]:
    base = Path(tempfile.mkdtemp(prefix="cud-xauth-", dir="/tmp"))
    base.chmod(0o755)
    model = ScriptedModel(scenario({"message": "done"}))
    url = model.start()
    servers: dict[str, XServer] = {}
    daemon = None
    try:
        shared: list[XauthEntry] = []
        tables = []
        for seat in ("s1", "s2"):
            cookie = secrets.token_bytes(16)
            own = base / f"{seat}.auth"  # the server's own file: its cookie alone
            own.write_bytes(encode(cookie_entries(b"", cookie)))
            own.chmod(0o600)
            (base / seat).mkdir()
            server = servers[seat] = start_xvfb(base / seat, width=320, height=240, auth=own)
            shared += cookie_entries(display_number(server.display), cookie)
            user = seat_users.make()
            tables.append(textwrap.dedent(f"""\
                [[seats]]
                name = "{seat}"
                display = "{server.display}"
                user = "{user.name}"
                home = "{make_home(base / seat, user)}"
                """))
        everyone = base / "Xauthority"  # the daemon's: every display's cookie
        everyone.write_bytes(encode(shared))
        everyone.chmod(0o600)
        (base / "daemon").mkdir(mode=0o755)
        daemon = Daemon(":0", url, workdir=base / "daemon", seats={}, config="".join(tables),
                        extra_env={"XAUTHORITY": str(everyone)})
        daemon.start()
        yield TwoSeats(daemon, servers)
    finally:
        if daemon is not None:
            daemon.cleanup()
        for server in servers.values():
            stop_process(server.proc)
        model.stop()
        shutil.rmtree(base, ignore_errors=True)


def run_as_seat(seats: TwoSeats, seat: str, *argv: str) -> tuple[int, str]:
    done = seats.daemon.call("exec", seat=seat, argv=list(argv), timeout=30)
    return done["exit_code"], (base64.b64decode(done["stdout"]) + base64.b64decode(done["stderr"])).decode()


def test_a_seats_user_opens_its_own_display_and_not_the_other_seats(two_seats: TwoSeats) -> None:
    for seat, other in (("s1", "s2"), ("s2", "s1")):
        own, theirs = two_seats.servers[seat].display, two_seats.servers[other].display
        code, out = run_as_seat(two_seats, seat, "xdpyinfo", "-display", own)
        assert code == 0 and f"name of display:    {own}" in out, out
        code, out = run_as_seat(two_seats, seat, "xdpyinfo", "-display", theirs)
        assert code != 0 and "unable to open display" in out, (seat, out)


def test_the_sessions_cookie_file_holds_its_displays_entries_only(two_seats: TwoSeats) -> None:
    for seat in ("s1", "s2"):
        code, out = run_as_seat(two_seats, seat, "/bin/sh", "-c", 'stat -c %a:%U "$XAUTHORITY"; xauth -n list')
        assert code == 0, out
        mode, *entries = out.splitlines()
        number = display_number(two_seats.servers[seat].display).decode()
        assert mode.startswith("600:") and entries, out
        assert all(line.split()[0].endswith(f":{number}") for line in entries), out


def test_the_daemon_itself_still_reaches_both_displays(two_seats: TwoSeats) -> None:
    states = {seat["name"]: seat["state"] for seat in two_seats.daemon.call("seats")}
    assert states == {"s1": "idle", "s2": "idle"}, states
