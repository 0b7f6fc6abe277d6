"""A seat of its own: private temp directories the reset empties, the home at /home/user, and the refusals.

One real daemon for the module (tests/support/session_seat.py) whose seat has ``private_tmp = true``
and ``home_path = "/home/user"``: openbox on Xvfb, a session bus of root's, a home and its template,
all under a directory in the host's /tmp, so the namespace must bind them in to work at all.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cud.cuctl.client import Client
from cud.daemon.seats.config import SeatConfig, check_seat_places, load_seats
from cud.daemon.session.namespace import PRIVATE_PLACES, Isolation
from cud.errors import ConfigError, CudError
from tests.support.daemon import cuctl
from tests.support.seat_users import SeatUsers, reachable_dir, tree_hash
from tests.support.session_seat import SEAT, SeatParts, SessionSeat, seat_parts, session_seat

HOME_PATH = "/home/user"


#: The second seat of the module's daemon, with the same home_path.
OTHER = "s2"
ISOLATION = f'private_tmp = true\nhome_path = "{HOME_PATH}"\n'


@dataclass
class TwoSeats:
    first: SessionSeat
    second: SeatParts
    second_base: Path


@pytest.fixture(scope="module")
def seats(seat_users: SeatUsers) -> Iterator[TwoSeats]:
    if os.geteuid() != 0:
        pytest.fail("a seat's namespaces need a daemon run as root; run the tests as root, as CI does")
    with reachable_dir("cud-ns-") as first, reachable_dir("cud-ns-") as second, \
            seat_parts(OTHER, seat_users.make(), second) as other, \
            session_seat(seat_users.make(), first, config=ISOLATION + other.table + ISOLATION) as made:
        yield TwoSeats(made, other, second)


@pytest.fixture(scope="module")
def seat(seats: TwoSeats) -> SessionSeat:
    return seats.first


def call(where: SessionSeat, kind: str, **fields: object) -> dict[str, object]:
    with Client(where.daemon.socket, timeout=60) as client:
        return client.call(kind, **fields)  # type: ignore[no-any-return]


def sh(seat: SessionSeat, script: str, on: str = SEAT) -> str:
    """``script`` run by /bin/sh as the seat's user in the session of seat ``on``; its stdout (it must exit 0)."""
    done = call(seat, "exec", seat=on, argv=["/bin/sh", "-c", script], timeout=60)
    out, err = (base64.b64decode(done[k]).decode() for k in ("stdout", "stderr"))  # type: ignore[arg-type]
    assert done["exit_code"] == 0, f"{script!r} exited {done['exit_code']}: {err}"
    return out


def private_listing(seat: SessionSeat) -> str:
    """Every path under the private places, as the session sees them (what a fresh namespace has, after a reset)."""
    return sh(seat, f"find {' '.join(PRIVATE_PLACES)} -xdev | sort")


#: In the name of everything the tests' tasks write: the host's temp places may change meanwhile (other processes
#: use them), but nothing named so may appear there.
MARK = "cudmark"


def marked_on_host() -> list[str]:
    return [f"{place}/{name}" for place in PRIVATE_PLACES if os.path.isdir(place)
            for name in os.listdir(place) if MARK in name]


def test_the_session_sees_its_home_at_home_path_and_its_own_tmp(seat: SessionSeat) -> None:
    call(seat, "reset", seat=SEAT)
    out = sh(seat, "pwd; echo $HOME; echo hi > ~/made.txt; cat /home/user/made.txt; ls -A /home; "
                   "xdpyinfo >/dev/null && echo x-works; dbus-send --session --print-reply --dest=org.freedesktop.DBus "
                   "/org/freedesktop/DBus org.freedesktop.DBus.GetId >/dev/null && echo bus-works; ls -A /tmp")
    lines = out.splitlines()
    assert lines[:6] == [HOME_PATH, HOME_PATH, "hi", "user", "x-works", "bus-works"], out
    # The host's home holds what the session wrote at /home/user; the host's /home is not the session's.
    assert (seat.home / "made.txt").read_text() == "hi\n"
    assert not os.path.exists(f"{HOME_PATH}/made.txt")
    assert ".X11-unix" in lines[6:]
    for shown in call(seat, "seats"):  # type: ignore[attr-defined]  # a list of seats
        assert (shown["private_tmp"], shown["home_path"], shown["network"]) == (True, HOME_PATH, "host")


#: Shell text written for a desktop VM: ~/ and /home/user/ both, run as written.
_VM_TASK = """
mkdir -p ~/Desktop /home/user/Documents
echo "$1" > /home/user/Desktop/who.txt
echo "$1" > ~/Documents/who.txt
echo "$1" > /tmp/who.txt
sleep 1
cat ~/Desktop/who.txt /home/user/Documents/who.txt /tmp/who.txt
ls -A /home
"""


def test_a_task_written_for_home_user_runs_as_written_on_two_seats_at_once(seats: TwoSeats) -> None:
    seat = seats.first
    for name in (SEAT, OTHER):
        call(seat, "reset", seat=name)
    outputs: dict[str, str] = {}

    def task(name: str) -> None:
        done = call(seat, "exec", seat=name, argv=["/bin/sh", "-c", _VM_TASK, "sh", name], timeout=60)
        outputs[name] = base64.b64decode(done["stdout"]).decode()  # type: ignore[arg-type]

    threads = [threading.Thread(target=task, args=(name,)) for name in (SEAT, OTHER)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for name in (SEAT, OTHER):  # each saw only what it wrote, in the same places
        assert outputs[name].splitlines() == [name, name, name, "user"], outputs
    for name, home in ((SEAT, seat.home), (OTHER, seats.second_base / "home")):
        assert (home / "Desktop" / "who.txt").read_text() == f"{name}\n"
        assert (home / "Documents" / "who.txt").read_text() == f"{name}\n"


def test_whatever_a_task_wrote_in_the_temp_places_is_gone_after_the_reset(seat: SessionSeat) -> None:
    call(seat, "reset", seat=SEAT)
    fresh = private_listing(seat)
    sh(seat, "for d in /tmp /var/tmp /dev/shm /run/lock; do echo x > $d/cudmark-left.$$; "
             "mkdir -p $d/.cudmark-hidden/deep; mkfifo $d/cudmark-fifo.$$; ln -s /etc/passwd $d/cudmark-link.$$; done; "
             "python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"/tmp/cudmark-sock\")'; "
             "setsid -f sh -c 'while :; do date > /var/tmp/cudmark-still; sleep 0.05; done' >/dev/null 2>&1")
    assert "cudmark-left." in sh(seat, "ls /dev/shm")
    assert marked_on_host() == []
    sh(seat, "ipcmk -M 4096; ipcmk -S 2; ipcmk -Q")
    assert len(ipc_of(seat.user.uid)) == 3
    call(seat, "reset", seat=SEAT)
    assert ipc_of(seat.user.uid) == []
    assert private_listing(seat) == fresh
    assert marked_on_host() == []  # nothing reached the host's own temp places


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
    "echo x > {place}/cudmark-f$$",
    "mkdir -p {place}/.cudmark-d$$/a/b && echo x > {place}/.cudmark-d$$/a/b/f",
    "mkfifo {place}/cudmark-p$$",
    "ln -s /etc {place}/cudmark-l$$",
    "python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' {place}/cudmark-s$$",
    "setsid -f sh -c 'while :; do date >> {place}/cudmark-w$$; sleep 0.1; done' >/dev/null 2>&1",
    "chmod 000 {place} 2>/dev/null; true",
    "ipcmk -M 4096 >/dev/null; ipcmk -S 2 >/dev/null; ipcmk -Q >/dev/null",  # outlive every process
])


def ipc_of(uid: int) -> list[str]:
    """The System V IPC objects (shm, sem, msg) ``uid`` owns or created, as /proc/sysvipc lists them."""
    found = []
    for kind in ("shm", "sem", "msg"):
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        header = lines[0].split()
        found += [f"{kind} {row[1]}" for row in map(str.split, lines[1:])
                  if str(uid) in (row[header.index("uid")], row[header.index("cuid")])]
    return found


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
          print_blob=True)
@given(writes=st.lists(st.tuples(_WRITES, st.sampled_from([*PRIVATE_PLACES, "~", "~/.config", "~/Desktop"])),
                       min_size=1, max_size=8))
def test_nothing_a_task_writes_anywhere_reaches_the_next_task(seat: SessionSeat,
                                                              writes: list[tuple[str, str]]) -> None:
    call(seat, "reset", seat=SEAT)
    fresh = private_listing(seat)
    sh(seat, "; ".join(f"mkdir -p {place}; " + write.format(place=place) for write, place in writes) + "; true")
    call(seat, "reset", seat=SEAT)
    assert private_listing(seat) == fresh
    assert tree_hash(seat.home) == tree_hash(seat.template)
    assert marked_on_host() == []
    assert ipc_of(seat.user.uid) == []


@pytest.mark.parametrize(("table", "key", "wanted"), [
    ({"home_path": "home/user"}, "seats[0].home_path", "'home/user'"),
    ({"home_path": "/"}, "seats[0].home_path", "'/'"),
    ({"home_path": "/etc"}, "seats[0].home_path", "'/etc'"),
    ({"home_path": "/var/lib/user"}, "seats[0].home_path", "'/var/lib/user'"),
    ({"home_path": "/home/a/b"}, "seats[0].home_path", "'/home/a/b'"),
    ({"home_path": "/home/.."}, "seats[0].home_path", "'/home/..'"),
    ({"network": "open"}, "seats[0].network", "'open'"),
    ({"network": []}, "seats[0].network", "[]"),
    ({"network": ["10.0.0.0/33"]}, "seats[0].network[0]", "'10.0.0.0/33'"),
    ({"network": ["10.0.0.1/8"]}, "seats[0].network[0]", "has host bits set"),
    ({"network": ["127.0.0.1", "10.0.0.1:70000"]}, "seats[0].network[1]", "'70000' is not 1 to 65535"),
    ({"network": ["[::1"]}, "seats[0].network[0]", "'[::1'"),
    ({"network": ["example.org:443"]}, "seats[0].network[0]", "'example.org:443'"),
    ({"private_tmp": "yes"}, "seats[0].private_tmp", "'yes'"),
])
def test_a_bad_view_is_refused_naming_the_seat_key_and_value(table: dict[str, object], key: str, wanted: str) -> None:
    seats = [{"name": "s1", "display": ":9", "user": "nobody", "home": "/var/lib/cud-seats/s1", **table}]
    with pytest.raises(ConfigError) as caught:
        load_seats({"seats": seats}, {}, {})
    assert key in str(caught.value) and wanted in str(caught.value)


def test_a_seat_sees_neither_the_other_seats_bus_nor_its_home_nor_the_daemons_socket(seats: TwoSeats) -> None:
    """All three lie under the host's /tmp here, which the session does not see: only its own bus socket and home
    are bound in. (Another seat's display is kept out by its cookie: tests/test_session_xauth.py.)"""
    seat = seats.first
    theirs = [seats.second.bus_address.removeprefix("unix:path="), str(seats.second_base / "home"),
              str(seat.daemon.socket)]
    assert all(os.path.exists(path) for path in theirs)  # there, for the host
    ours = [seat.bus_address.removeprefix("unix:path=")]
    out = sh(seat, " ".join(f"test -e '{p}' && echo '{p}';" for p in (*theirs, *ours)) + " true")
    assert out.splitlines() == ours


@pytest.mark.parametrize("place", ["/home/user", "/home/user/.local/state/cud"])
def test_a_home_path_where_the_daemons_state_is_is_refused(place: str) -> None:
    seat = SeatConfig("s1", display=":9", isolation=Isolation(home_path="/home/user"))
    with pytest.raises(ConfigError) as caught:
        check_seat_places((seat,), {"the daemon's state directory": place}, None)
    assert "'seats[0].home_path' = '/home/user' is refused" in str(caught.value) and place in str(caught.value)
    check_seat_places((seat,), {"the daemon's state directory": "/home/username"}, None)  # a neighbour: fine


def test_an_osworld_task_naming_home_user_in_shell_text_runs_as_written(seat: SessionSeat, tmp_path: Path) -> None:
    """cuctl sees the seat's home_path is OSWorld's /home/user, so the task's shell text is not refused nor
    rewritten: it runs as OSWorld's VM would run it, and the check reads what it wrote."""
    task = {"id": "as-written", "instruction": "nothing to do", "config": [
        {"type": "execute", "parameters": {"shell": True, "command":
                                           "mkdir -p /home/user/Desktop && echo done > /home/user/Desktop/out.txt"}}],
            "evaluator": {"func": "check_include_exclude",
                          "result": {"type": "vm_command_line", "command": "cat /home/user/Desktop/out.txt",
                                     "shell": True},
                          "expected": {"type": "rule", "rules": {"include": ["done"], "exclude": ["nothing"]}}}}
    path = tmp_path / "as-written.json"
    path.write_text(json.dumps(task))
    done = cuctl(seat.daemon.socket, "submit", "--from-osworld", str(path), "--seat", SEAT, "--wait")
    assert done.returncode == 0 and "verdict: passed" in done.stderr, (done.stdout, done.stderr)
    assert (seat.home / "Desktop" / "out.txt").read_text() == "done\n"


@pytest.mark.parametrize(("argv", "cwd", "why"), [
    (["/no/such/program"], None, "No such file or directory"),
    (["/home/user/Desktop/notes.txt"], None, "Permission denied"),  # the template's, 0644
    (["/bin/true"], "Desktop/notes.txt", "is not a directory"),
])
def test_a_command_that_cannot_start_in_the_session_says_so(seat: SessionSeat, argv: list[str], cwd: str | None,
                                                             why: str) -> None:
    """Through nsexec's pipe (the exec happens in the namespace, after the daemon's spawn returned)."""
    call(seat, "reset", seat=SEAT)
    fields = {} if cwd is None else {"cwd": cwd}
    with pytest.raises(CudError) as caught:
        call(seat, "exec", seat=SEAT, argv=argv, timeout=30, **fields)
    assert why in str(caught.value), str(caught.value)
