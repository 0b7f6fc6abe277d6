"""A seat whose session bus the seat's user runs: the reset ends it with the rest, and refuses the seat.

The user could end such a bus and listen at its address with a program of its own (the socket's directory is
theirs), which a sweep sparing "the bus daemon" would then spare. One real daemon for the module
(tests/support/session_seat.py with ``bus_as_seat_user``): openbox on Xvfb, a session bus run by the seat's user
in a directory of theirs, a home and its template.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.cuctl.client import Client, RemoteError
from cud.daemon.session.sweep import session_pids
from tests.support.recorder import wait_until
from tests.support.seat_users import SeatUsers, tree_hash
from tests.support.session_seat import (
    SEAT,
    SYSTEM_PYTHON,
    TAKEOVER,
    SessionSeat,
    alive,
    as_seat_user,
    bus_call,
    listening,
    session_seat,
)
from tests.support.xserver import stop_process

# Not as root, the seat's user is the tests' own, whose daemon ends only the session's marked processes.
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a seat user of its own needs root to be made")


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SessionSeat]:
    base = Path(tempfile.mkdtemp(prefix="cud-reset-own-bus-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(seat_users.make(), base, bus_as_seat_user=True) as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def call(where: SessionSeat, kind: str, **fields: object) -> object:
    with Client(where.daemon.socket, timeout=120) as client:
        return client.call(kind, **fields)


def seat_view(where: SessionSeat) -> dict[str, object]:
    return call(where, "seats")[0]  # type: ignore[index]


def test_a_bus_of_the_seat_user_is_ended_and_refused_until_another_users_bus_serves_its_address(
        seat: SessionSeat) -> None:
    user, path = seat.user, seat.bus_address.removeprefix("unix:path=")
    assert listening(seat.bus_address) == (seat.bus.pid, user.uid)
    # The user puts a program of its own where the bus was: possible, as bus and directory are theirs.
    script = seat.base / "takeover.py"
    script.write_text(TAKEOVER)
    attacker = subprocess.Popen([*as_seat_user(seat), SYSTEM_PYTHON, str(script), str(seat.bus.pid), path],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    root_bus: subprocess.Popen[bytes] | None = None
    try:
        assert attacker.stdout is not None
        tried = json.loads(attacker.stdout.readline())
        assert tried["kill"] == tried["listen"] == "done", tried
        assert listening(seat.bus_address) == (attacker.pid, user.uid)
        with pytest.raises(RemoteError) as refused:
            call(seat, "reset", seat=SEAT)
        why = (f"seat 's1': its session bus {seat.bus_address} was served by pid {attacker.pid}, a process of its "
               f"user {user.name!r} (uid {user.uid}), which the reset ends")
        assert why in str(refused.value), refused.value
        assert not alive(attacker.pid) and session_pids(user.uid) == []  # ended all the same: nothing spared
        state = seat_view(seat)
        assert state["state"] == "unavailable" and why in str(state["error"]), state
        # Nobody listens there now: still refused, the seat is not handed out without its bus.
        with pytest.raises(RemoteError, match="was served by pid"):
            call(seat, "reset", seat=SEAT)
        assert seat_view(seat)["state"] == "unavailable"

        # A bus of root's at the address: the seat is clean and available again.
        os.unlink(path)
        root_bus = subprocess.Popen(["dbus-daemon", f"--config-file={seat.base / 'bus' / 'bus.conf'}", "--nofork",
                                     "--nopidfile"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: bus_call(seat.bus_address, "org.freedesktop.DBus.GetId").returncode == 0, 30,
                   "root's bus to answer")
        call(seat, "reset", seat=SEAT)
        assert tree_hash(seat.home) == tree_hash(seat.template)
        wait_until(lambda: seat_view(seat)["state"] == "idle", 60, "the seat to be idle again")
        assert root_bus.poll() is None and listening(seat.bus_address) == (root_bus.pid, 0)
    finally:
        stop_process(attacker)
        attacker.stdout.close()  # type: ignore[union-attr]
        if root_bus is not None:
            stop_process(root_bus)
