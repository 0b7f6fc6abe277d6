"""A seat with ``network = "none"``: its session has a loopback of its own and nothing else; the daemon's is untouched.

Everything here (the daemon, its X server and bus, the scripted model, the test's own listener) runs in a
network namespace the module makes (tests/support/netns.py ``own_network``), so nothing listens on the
machine's loopback. The seat's session then sits in a further namespace of its own.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cud.cuctl.client import Client, RemoteError
from cud.daemon.session.processes import debugger_flag
from tests.support.netns import CONNECT, own_network
from tests.support.seat_users import SeatUsers, reachable_dir
from tests.support.session_seat import SEAT, SessionSeat, seat_parts, session_seat

#: The switches that open a debugging port, as Chromium and Firefox name them (without the dash or two before).
SWITCHES = ("remote-debugging-port", "remote-debugging-address", "start-debugger-server")
#: The second seat: the machine's network, to what its allow-list names only.
ALLOWING = "s2"


@dataclass
class Place:
    seat: SessionSeat
    #: Ports of two servers on the namespace's loopback: the allow-list names the first.
    allowed_port: int
    other_port: int
    #: The port of a server at TEST_NET_HOST, an address of the namespace's own (on lo): the test reaches it, a seat
    #: only through its network.
    test_net_port: int


#: An address of TEST-NET-1 (RFC 5737), given to the test's namespace's lo: inside the allow-list's 192.0.2.0/24.
TEST_NET_HOST = "192.0.2.1"


@pytest.fixture(scope="module")
def everything(seat_users: SeatUsers) -> Iterator[Place]:
    """Seat s1 (``network = "none"``) and s2 (an allow-list naming one loopback server and 192.0.2.0/24), one
    daemon; three servers: two on 127.0.0.1, one on TEST_NET_HOST."""
    with reachable_dir("cud-net-") as first_base, reachable_dir("cud-net-") as second_base, own_network(), \
            contextlib.ExitStack() as servers:
        subprocess.run(["ip", "addr", "add", f"{TEST_NET_HOST}/32", "dev", "lo"], check=True, timeout=30)
        port, other_port, test_net_port = (servers.enter_context(socket.create_server((host, 0))).getsockname()[1]
                                           for host in ("127.0.0.1", "127.0.0.1", TEST_NET_HOST))
        with seat_parts(ALLOWING, seat_users.make(), second_base) as second:
            config = f'network = "none"\n{second.table}network = ["127.0.0.1:{port}", "192.0.2.0/24"]\n'
            with session_seat(seat_users.make(), first_base, config=config) as made:
                assert _cud_tables() != []
                yield Place(made, port, other_port, test_net_port)
        assert _cud_tables() == []  # the daemon took its rules away when it stopped


def _cud_tables() -> list[str]:
    listed = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    return [line for line in listed.splitlines() if " cud_" in line]


@pytest.fixture(scope="module")
def place(everything: Place) -> tuple[SessionSeat, int]:
    return everything.seat, everything.other_port


def connect_from_seat(seat: SessionSeat, port: int, on: str = SEAT, address: str = "127.0.0.1") -> str:
    with Client(seat.daemon.socket, timeout=60) as client:
        done = client.call("exec", seat=on, argv=["python3", "-c", CONNECT.replace("'127.0.0.1'", repr(address)),
                                                  str(port)], timeout=30)
    assert done["exit_code"] == 0, base64.b64decode(done["stderr"]).decode()
    return base64.b64decode(done["stdout"]).decode().strip()


def test_the_seat_reaches_no_server_of_the_host_and_fails_at_once(place: tuple[SessionSeat, int]) -> None:
    seat, port = place
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass  # the server answers everyone else
    # Refused at once by the session's own loopback, where nothing listens: never a timeout.
    assert connect_from_seat(seat, port) == "ECONNREFUSED"
    with Client(seat.daemon.socket, timeout=60) as client:
        assert [s["network"] for s in client.call("seats")] == ["none", "allow"]


def test_the_seat_reaches_no_other_address(everything: Place) -> None:
    with socket.create_connection((TEST_NET_HOST, everything.test_net_port), timeout=10):
        pass  # a server the test's own namespace reaches
    assert connect_from_seat(everything.seat, everything.test_net_port, address=TEST_NET_HOST) == "ENETUNREACH"


def test_the_seat_cannot_reach_the_daemons_model_endpoint(place: tuple[SessionSeat, int]) -> None:
    seat, _port = place
    model_port = urlsplit(seat.daemon.env["OPENAI_BASE_URL"]).port
    assert model_port is not None
    assert connect_from_seat(seat, model_port) == "ECONNREFUSED"


def test_the_daemons_model_requests_still_work(place: tuple[SessionSeat, int]) -> None:
    seat, _port = place
    with Client(seat.daemon.socket, timeout=60) as client:
        task = client.call("submit", prompt="say done", seat=SEAT)
    assert seat.daemon.wait_state(task["id"], "succeeded", "failed", "error")["state"] == "succeeded"


def test_the_seat_still_reaches_its_display_and_bus(place: tuple[SessionSeat, int]) -> None:
    seat, _port = place
    with Client(seat.daemon.socket, timeout=60) as client:
        client.call("reset", seat=SEAT)
        done = client.call("exec", seat=SEAT, timeout=30, argv=[
            "/bin/sh", "-c", "xdpyinfo >/dev/null && dbus-send --session --print-reply --dest=org.freedesktop.DBus "
                             "/org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null && echo both"])
    assert base64.b64decode(done["stdout"]).decode().strip() == "both", base64.b64decode(done["stderr"])


def test_an_allow_list_lets_the_seat_reach_what_it_names_and_nothing_else(everything: Place) -> None:
    seat = everything.seat
    assert connect_from_seat(seat, everything.allowed_port, on=ALLOWING) == "connected"
    assert connect_from_seat(seat, everything.other_port, on=ALLOWING) == "ECONNREFUSED"  # at once: a reset
    model_port = urlsplit(seat.daemon.env["OPENAI_BASE_URL"]).port
    assert model_port is not None
    assert connect_from_seat(seat, model_port, on=ALLOWING) == "ECONNREFUSED"
    # A network it names, without a port: any port of it.
    assert connect_from_seat(seat, everything.test_net_port, on=ALLOWING, address=TEST_NET_HOST) == "connected"
    with Client(seat.daemon.socket, timeout=60) as client:
        shown = [s["allowed"] for s in client.call("seats")]
    assert shown == [[], [f"127.0.0.1/32:{everything.allowed_port}", "192.0.2.0/24"]]


def test_the_daemons_model_requests_work_for_a_seat_with_an_allow_list(everything: Place) -> None:
    seat = everything.seat
    with Client(seat.daemon.socket, timeout=60) as client:
        task = client.call("submit", prompt="say done", seat=ALLOWING)
    assert seat.daemon.wait_state(task["id"], "succeeded", "failed", "error")["state"] == "succeeded"


def test_a_browsers_debugging_port_opens_only_where_the_loopback_is_the_seats_own(everything: Place) -> None:
    """Whoever reaches a DevTools port drives the browser: on the allow-list seat (the machine's loopback) no command
    cud runs may open one, not even inside a shell's text; on the seat with a loopback of its own it runs."""
    seat = everything.seat
    with Client(seat.daemon.socket, timeout=60) as client:
        for flag, dashes in itertools.product(SWITCHES, ("-", "--")):
            argv = ["/bin/sh", "-c", f"echo chromium {dashes}{flag}=0"]
            done = client.call("exec", seat=SEAT, argv=argv, timeout=30)
            assert base64.b64decode(done["stdout"]).decode().strip() == f"chromium {dashes}{flag}=0"
            with pytest.raises(RemoteError) as caught:
                client.call("exec", seat=ALLOWING, argv=argv, timeout=30)
            assert flag in caught.value.message and "'allow'" in caught.value.message, caught.value.message


#: Text around a switch in an argument: anything, a shell's quoting and separators included.
_around = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)


@given(before=st.lists(_around, max_size=4), after=st.lists(_around, max_size=4), flag=st.sampled_from(SWITCHES),
       dashes=st.sampled_from(["-", "--"]), left=_around, right=_around)
def test_a_debugging_switch_is_found_wherever_it_is_written(before: list[str], after: list[str], flag: str, dashes: str,
                                                          left: str, right: str) -> None:
    """Chromium and Firefox take a switch after one dash as after two, alone or inside a shell's text."""
    found = debugger_flag([*before, f"{left}{dashes}{flag}{right}", *after])
    assert found is not None and found in f"{left}{dashes}{flag}{right}" + "".join(before + after)


@given(argv=st.lists(_around.filter(lambda a: not any(f in a for f in SWITCHES)), max_size=6))
def test_a_command_without_one_runs(argv: list[str]) -> None:
    assert debugger_flag(argv) is None
    assert debugger_flag(["chromium", "--remote-debugging-pipe", "--remote-allow-origins=*"]) is None
