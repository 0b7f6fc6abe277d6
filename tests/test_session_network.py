"""A seat with ``network = "none"``: its session has a loopback of its own and nothing else; the daemon's is untouched.

Everything here (the daemon, its X server and bus, the scripted model, the test's own listener) runs in a
network namespace the module makes (tests/support/netns.py ``own_network``), so nothing listens on the
machine's loopback. The seat's session then sits in a further namespace of its own.
"""

from __future__ import annotations

import base64
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cud.cuctl.client import Client
from tests.support.netns import own_network
from tests.support.seat_users import SeatUsers
from tests.support.session_seat import SEAT, SessionSeat, session_seat

#: Connects to 127.0.0.1:PORT; prints how that ended (errno's name, or "connected").
_CONNECT = ("import errno, socket, sys\n"
            "try:\n"
            "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10).close()\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print(errno.errorcode.get(exc.errno, repr(exc)))\n")


@pytest.fixture(scope="module")
def place(seat_users: SeatUsers) -> Iterator[tuple[SessionSeat, int]]:
    """The seat (``network = "none"``) and the port of a server listening on the namespace's loopback."""
    base = Path(tempfile.mkdtemp(prefix="cud-net-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with own_network(), socket.create_server(("127.0.0.1", 0)) as server, \
                session_seat(seat_users.make(), base, config='network = "none"\n') as made:
            server.listen(16)
            yield made, server.getsockname()[1]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def connect_from_seat(seat: SessionSeat, port: int) -> str:
    with Client(seat.daemon.socket, timeout=60) as client:
        done = client.call("exec", seat=SEAT, argv=["python3", "-c", _CONNECT, str(port)], timeout=30)
    assert done["exit_code"] == 0, base64.b64decode(done["stderr"]).decode()
    return base64.b64decode(done["stdout"]).decode().strip()


def test_the_seat_reaches_no_server_of_the_host_and_fails_at_once(place: tuple[SessionSeat, int]) -> None:
    seat, port = place
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass  # the server answers everyone else
    # Refused at once by the session's own loopback, where nothing listens: never a timeout.
    assert connect_from_seat(seat, port) == "ECONNREFUSED"
    with Client(seat.daemon.socket, timeout=60) as client:
        assert [s["network"] for s in client.call("seats")] == ["none"]


def test_the_seat_reaches_no_other_address(place: tuple[SessionSeat, int]) -> None:
    seat, _port = place
    with Client(seat.daemon.socket, timeout=60) as client:  # TEST-NET-1 (RFC 5737): routed nowhere, in any case
        done = client.call("exec", seat=SEAT, timeout=30, argv=["python3", "-c", _CONNECT.replace(
            "'127.0.0.1'", "'192.0.2.1'"), "80"])
    assert base64.b64decode(done["stdout"]).decode().strip() == "ENETUNREACH"


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
