"""A seat of its own: private temp directories the reset empties, the home at /home/user, and the refusals.

One real daemon for the module (tests/support/session_seat.py) whose seat has ``private_tmp = true``
and ``home_path = "/home/user"``: openbox on Xvfb, a session bus of root's, a home and its template,
all under a directory in the host's /tmp, so the namespace must bind them in to work at all.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.cuctl.client import Client
from cud.daemon.seats.config import load_seats
from cud.daemon.session.namespace import PRIVATE_PLACES
from cud.errors import ConfigError
from tests.support.seat_users import SeatUsers, tree_hash
from tests.support.session_seat import SEAT, SessionSeat, session_seat

HOME_PATH = "/home/user"


@pytest.fixture(scope="module")
def seat(seat_users: SeatUsers) -> Iterator[SessionSeat]:
    if os.geteuid() != 0:
        pytest.fail("a seat's namespaces need a daemon run as root; run the tests as root, as CI does")
    base = Path(tempfile.mkdtemp(prefix="cud-ns-", dir="/tmp"))
    base.chmod(0o755)
    try:
        with session_seat(seat_users.make(), base, config=f'private_tmp = true\nhome_path = "{HOME_PATH}"\n') as made:
            yield made
    finally:
        shutil.rmtree(base, ignore_errors=True)


def call(where: SessionSeat, kind: str, **fields: object) -> dict[str, object]:
    with Client(where.daemon.socket, timeout=60) as client:
        return client.call(kind, **fields)  # type: ignore[no-any-return]


def sh(seat: SessionSeat, script: str) -> str:
    """``script`` run by /bin/sh as the seat's user in its session; its stdout (it must exit 0)."""
    done = call(seat, "exec", seat=SEAT, argv=["/bin/sh", "-c", script], timeout=60)
    out, err = (base64.b64decode(done[k]).decode() for k in ("stdout", "stderr"))  # type: ignore[arg-type]
    assert done["exit_code"] == 0, f"{script!r} exited {done['exit_code']}: {err}"
    return out


def private_listing(seat: SessionSeat) -> str:
    """Every path under the private places, as the session sees them (what a fresh namespace has, after a reset)."""
    return sh(seat, f"find {' '.join(PRIVATE_PLACES)} -xdev | sort")


def host_entries() -> dict[str, set[str]]:
    return {place: set(os.listdir(place)) for place in PRIVATE_PLACES if os.path.isdir(place)}


def test_the_session_sees_its_home_at_home_path_and_its_own_tmp(seat: SessionSeat) -> None:
    call(seat, "reset", seat=SEAT)
    out = sh(seat, "pwd; echo $HOME; echo hi > ~/made.txt; cat /home/user/made.txt; ls -A /home; "
                   "xdpyinfo >/dev/null && echo x-works; ls -A /tmp")
    lines = out.splitlines()
    assert lines[:5] == [HOME_PATH, HOME_PATH, "hi", "user", "x-works"], out
    # The host's home holds what the session wrote at /home/user; the host's /home is not the session's.
    assert (seat.home / "made.txt").read_text() == "hi\n"
    assert not os.path.exists(f"{HOME_PATH}/made.txt")
    assert ".X11-unix" in lines[5:]
    (shown,) = call(seat, "seats")  # type: ignore[misc]  # a list of one seat
    assert (shown["private_tmp"], shown["home_path"], shown["network"]) == (True, HOME_PATH, "host")


def test_whatever_a_task_wrote_in_the_temp_places_is_gone_after_the_reset(seat: SessionSeat) -> None:
    call(seat, "reset", seat=SEAT)
    fresh = private_listing(seat)
    before = host_entries()
    sh(seat, "for d in /tmp /var/tmp /dev/shm /run/lock; do echo x > $d/left.$$; mkdir -p $d/.hidden/deep; "
             "mkfifo $d/fifo.$$; ln -s /etc/passwd $d/link.$$; done; "
             "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/tmp/sock\")'; "
             "setsid -f sh -c 'while :; do date > /var/tmp/still-writing; sleep 0.05; done' >/dev/null 2>&1")
    assert "left." in sh(seat, "ls /dev/shm")
    call(seat, "reset", seat=SEAT)
    assert private_listing(seat) == fresh
    assert host_entries() == before  # nothing reached the host's own temp places


def test_the_session_can_write_only_its_private_places_its_home_and_runtime_directory(seat: SessionSeat) -> None:
    """``find -writable`` as the seat's user over the whole file system, in its session: every place it may write is
    one the reset empties (the private places, the home, the runtime directory) or a device every user may write."""
    call(seat, "reset", seat=SEAT)
    runtime = sh(seat, "echo $XDG_RUNTIME_DIR").strip()
    found = sh(seat, "find / \\( -path /proc -o -path /sys \\) -prune -o -writable ! -type l -print 2>/dev/null; true")
    allowed = (*PRIVATE_PLACES, HOME_PATH, runtime)
    # Devices keep nothing of one task for the next: a FUSE mount goes with the namespace, and a tun device
    # outlives its opener only by TUNSETPERSIST, which needs CAP_NET_ADMIN.
    devices = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx",
               "/dev/fuse", "/dev/net/tun"}
    strays = [path for path in found.splitlines()
              if not any(path == a or path.startswith(a + "/") for a in allowed)
              and path not in devices and not path.startswith("/dev/pts/")]
    assert strays == [], strays


_WRITES = st.sampled_from([
    "echo x > {place}/f$$",
    "mkdir -p {place}/.d$$/a/b && echo x > {place}/.d$$/a/b/f",
    "mkfifo {place}/p$$",
    "ln -s /etc {place}/l$$",
    "python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' {place}/s$$",
    "setsid -f sh -c 'while :; do date >> {place}/w$$; sleep 0.1; done' >/dev/null 2>&1",
    "chmod 000 {place} 2>/dev/null; true",
])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          print_blob=True)
@given(writes=st.lists(st.tuples(_WRITES, st.sampled_from([*PRIVATE_PLACES, "~", "~/.config", "~/Desktop"])),
                       min_size=1, max_size=8))
def test_nothing_a_task_writes_anywhere_reaches_the_next_task(seat: SessionSeat,
                                                              writes: list[tuple[str, str]]) -> None:
    call(seat, "reset", seat=SEAT)
    fresh, before = private_listing(seat), host_entries()
    sh(seat, "; ".join(f"mkdir -p {place}; " + write.format(place=place) for write, place in writes) + "; true")
    call(seat, "reset", seat=SEAT)
    assert private_listing(seat) == fresh
    assert tree_hash(seat.home) == tree_hash(seat.template)
    assert host_entries() == before


@pytest.mark.parametrize(("table", "key", "wanted"), [
    ({"home_path": "home/user"}, "seats[0].home_path", "'home/user'"),
    ({"home_path": "/"}, "seats[0].home_path", "'/'"),
    ({"home_path": "/etc"}, "seats[0].home_path", "'/etc'"),
    ({"home_path": "/var/lib/user"}, "seats[0].home_path", "'/var/lib/user'"),
    ({"home_path": "/home/a/b"}, "seats[0].home_path", "'/home/a/b'"),
    ({"home_path": "/home/.."}, "seats[0].home_path", "'/home/..'"),
    ({"network": "open"}, "seats[0].network", "'open'"),
    ({"private_tmp": "yes"}, "seats[0].private_tmp", "'yes'"),
])
def test_a_bad_view_is_refused_naming_the_seat_key_and_value(table: dict[str, object], key: str, wanted: str) -> None:
    seats = [{"name": "s1", "display": ":9", "user": "nobody", "home": "/var/lib/cud-seats/s1", **table}]
    with pytest.raises(ConfigError) as caught:
        load_seats({"seats": seats}, {}, {})
    assert key in str(caught.value) and wanted in str(caught.value)
