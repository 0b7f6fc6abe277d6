"""A three-seat daemon on three private Xvfbs: parallel seats, FIFO within one, pinning, a seat that dies.

Every task types "?" into the recorder window of the display it ran on, so which
seat ran a task is checked where it matters: on that screen. Tasks
ask for an approval before they type (policy ``actions``), which holds them
running for as long as a test needs, without timing anything.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cud.protocol import PROTOCOL_VERSION
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.rawx import held_state
from tests.support.recorder import Recorder, wait_until
from tests.support.sockets import unread_messages
from tests.support.xserver import XServer, restart_xvfb, start_xvfb

NAMES = ("a", "b", "c")
DATA = Path(__file__).parent / "data"


@dataclass
class Seats:
    daemon: Daemon
    servers: dict[str, XServer]
    recorders: dict[str, Recorder]
    workdir: Path

    def seat(self, name: str) -> dict[str, object]:
        return next(s for s in self.daemon.call("seats") if s["name"] == name)

    def letters(self) -> dict[str, str]:
        return {name: rec.text() for name, rec in self.recorders.items()}


def _typing_model() -> ScriptedModel:
    # The scripted model answers by turn, the same for every task: look, type "?", done.
    steps = [{"actions": [{"type": "screenshot"}]}, {"actions": [{"type": "type", "text": "?"}]},
             {"message": "typed"}]
    return ScriptedModel({"name": "letters", "steps": steps})


@pytest.fixture
def seats(short_tmp: Path) -> Iterator[Seats]:
    servers: dict[str, XServer] = {}
    recorders: dict[str, Recorder] = {}
    model = _typing_model()
    daemon: Daemon | None = None
    try:
        for name in NAMES:
            (short_tmp / name).mkdir()
            servers[name] = start_xvfb(short_tmp / name)
            recorders[name] = Recorder(servers[name].display, short_tmp / name, "1280x800+0+0")
        (short_tmp / "daemon").mkdir()
        # Each seat's driver in a driver process of its own: the seats' independence, a killed display and a
        # killed driver process are checked that way (every other daemon test runs the drivers on threads).
        daemon = Daemon("", model.start(), workdir=short_tmp / "daemon", approval="actions",
                        seats={name: servers[name].display for name in NAMES}, config="driver_processes = true\n")
        daemon.model = model  # type: ignore[attr-defined]
        yield Seats(daemon.start(), servers, recorders, short_tmp)
    finally:
        if daemon is not None:
            daemon.stop()
        model.stop()
        for rec in recorders.values():
            rec.stop()
        for server in servers.values():
            server.stop()


def _approve(daemon: Daemon, task_id: int) -> None:
    daemon.call("approve", id=daemon.wait_approval(task_id)["id"])


def _pending_tasks(daemon: Daemon) -> set[int]:
    return {a["task_id"] for a in daemon.call("approvals")}


def test_three_seats_run_three_tasks_at_once_and_each_seat_one_at_a_time_in_order(seats: Seats) -> None:
    daemon = seats.daemon
    ids = [daemon.call("submit", prompt=f"task {n}")["id"] for n in range(6)]
    # Three tasks wait for approval at the same moment, one per seat; the rest wait their turn.
    wait_until(lambda: _pending_tasks(daemon) == set(ids[:3]), 30, "three approvals at once")
    running = [daemon.task(i) for i in ids[:3]]
    assert sorted(t["seat"] for t in running) == list(NAMES)
    assert [daemon.task(i)["state"] for i in ids[3:]] == ["queued"] * 3
    busy = {s["name"]: s["task"] for s in daemon.call("seats")}
    assert busy == {t["seat"]: t["id"] for t in running}
    # Each approval names the seat whose screen it is about.
    assert {a["task_id"]: a["seat"] for a in daemon.call("approvals")} == {t["id"]: t["seat"] for t in running}
    # Free the second task's seat: the oldest queued task goes there, and only there.
    second = running[1]
    _approve(daemon, second["id"])
    daemon.wait_state(second["id"], "succeeded")
    wait_until(lambda: ids[3] in _pending_tasks(daemon), 30, "task 4 to start")
    assert daemon.task(ids[3])["seat"] == second["seat"]
    assert [daemon.task(i)["state"] for i in ids[4:]] == ["queued"] * 2
    for task_id in [ids[0], ids[2], ids[3], ids[4], ids[5]]:
        _approve(daemon, task_id)
        daemon.wait_state(task_id, "succeeded")
    tasks = [daemon.task(i) for i in ids]
    # First in, first out: tasks started in the order they were submitted...
    assert [t["started_at"] for t in tasks] == sorted(t["started_at"] for t in tasks)
    # ...and on each seat one after another, never two at once.
    for name in NAMES:
        mine = [t for t in tasks if t["seat"] == name]
        assert all(a["finished_at"] <= b["started_at"] for a, b in zip(mine, mine[1:], strict=False)), mine
        # Every task typed "?" on its own seat's screen, and nowhere else.
        seats.recorders[name].wait_text("?" * len(mine))
    assert sum(len(text) for text in seats.letters().values()) == 6


def test_pinned_tasks_wait_for_their_seat_while_unpinned_ones_take_any(seats: Seats) -> None:
    daemon = seats.daemon
    first_c = daemon.call("submit", prompt="on c", seat="c")["id"]
    wait_until(lambda: first_c in _pending_tasks(daemon), 30, "the first task on c")
    assert daemon.task(first_c)["seat"] == "c" and daemon.task(first_c)["pinned"] is True
    second_c = json_out(cuctl(daemon.socket, "submit", "again on c", "--seat", "c", "--json"))["id"]
    anywhere = daemon.call("submit", prompt="anywhere")["id"]
    # a and b are free, yet the second task for c waits for c; the unpinned one takes a.
    wait_until(lambda: anywhere in _pending_tasks(daemon), 30, "the unpinned task")
    assert daemon.task(anywhere)["seat"] == "a"
    queued = daemon.task(second_c)
    assert (queued["state"], queued["seat"], queued["pinned"]) == ("queued", "c", True)
    assert {s["name"]: s["state"] for s in daemon.call("seats")} == {"a": "busy", "b": "idle", "c": "busy"}
    _approve(daemon, first_c)
    _approve(daemon, second_c)
    _approve(daemon, anywhere)
    for task_id in (first_c, second_c, anywhere):
        assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"
    assert daemon.task(second_c)["seat"] == "c"
    seats.recorders["c"].wait_text("??")
    seats.recorders["a"].wait_text("?")
    assert seats.recorders["b"].text() == ""
    # Every view of a task carries its seat: follow, show, report and export.
    followed = cuctl(daemon.socket, "follow", str(second_c))
    assert followed.returncode == 0 and f"task {second_c} running on seat c" in followed.stdout
    assert "seat:          c" in cuctl(daemon.socket, "show", str(second_c)).stdout
    page = seats.workdir / "report.html"
    assert cuctl(daemon.socket, "report", str(second_c), "-o", str(page)).returncode == 0
    assert "<dt>Seat</dt><dd>c (pinned)</dd>" in page.read_text()
    exported = seats.workdir / "export"
    assert cuctl(daemon.socket, "export", str(second_c), "-o", str(exported)).returncode == 0
    task_json = json.loads((exported / "task.json").read_text())
    assert (task_json["seat"], task_json["pinned"]) == ("c", True)
    # A seat's screen on its own, by name; with three seats the name is required.
    shot = seats.workdir / "b.png"
    assert cuctl(daemon.socket, "screenshot", "--seat", "b", "-o", str(shot)).returncode == 0
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    unnamed = cuctl(daemon.socket, "screenshot", "-o", str(shot))
    assert unnamed.returncode == 2 and "this daemon has 3 seats; name one for a screenshot: a, b, c" in unnamed.stderr


def test_a_killed_x_server_fails_its_task_its_seat_waits_and_comes_back(seats: Seats) -> None:
    daemon = seats.daemon
    first = daemon.call("submit", prompt="on b", seat="b")["id"]
    wait_until(lambda: first in _pending_tasks(daemon), 30, "the task on b")
    display = seats.servers["b"].display
    seats.recorders["b"].stop()
    seats.servers["b"].kill()  # its number stays ours, so the seat can only come back on our server
    _approve(daemon, first)  # the approved typing reaches a display that is gone
    failed = daemon.wait_state(first, "failed")
    assert failed["error"]["kind"] == "display_unavailable" and display in failed["error"]["message"]
    wait_until(lambda: seats.seat("b")["state"] == "unavailable", 30, "seat b to be unavailable")
    seat_b = seats.seat("b")
    assert seat_b["size"] is None and display in seat_b["error"] and seat_b["task"] is None
    human = cuctl(daemon.socket, "seats")
    assert human.returncode == 0 and "unavailable" in human.stdout
    # Pinned work waits for b; unpinned work goes to the seats that answer.
    pinned = daemon.call("submit", prompt="on b again", seat="b")["id"]
    others = [daemon.call("submit", prompt=f"elsewhere {n}")["id"] for n in range(2)]
    wait_until(lambda: set(others) <= _pending_tasks(daemon), 30, "the unpinned tasks on a and c")
    assert sorted(daemon.task(i)["seat"] for i in others) == ["a", "c"]
    assert daemon.task(pinned)["state"] == "queued"
    for task_id in others:
        _approve(daemon, task_id)
        daemon.wait_state(task_id, "succeeded")
    # A new X server on the same display: the seat comes back by itself and runs its task there.
    seats.servers["b"] = restart_xvfb(seats.servers["b"])
    wait_until(lambda: pinned in _pending_tasks(daemon), 60, "the pinned task to start on the restarted b")
    seats.recorders["b"] = Recorder(display, seats.workdir / "b", "1280x800+0+0")
    assert seats.seat("b")["state"] == "busy" and seats.seat("b")["size"] == [1280, 800]
    _approve(daemon, pinned)
    assert daemon.wait_state(pinned, "succeeded")["seat"] == "b"
    seats.recorders["b"].wait_text("?")
    wait_until(lambda: seats.seat("b")["state"] == "idle", 30, "seat b idle again")


def test_a_driver_process_killed_mid_step_fails_only_its_seats_task_and_the_seat_comes_back(seats: Seats) -> None:
    daemon = seats.daemon
    ids = {name: daemon.call("submit", prompt=f"on {name}", seat=name)["id"] for name in NAMES}
    wait_until(lambda: set(ids.values()) <= _pending_tasks(daemon), 30, "a task waiting on every seat")
    pids = {name: seats.seat(name)["driver_pid"] for name in NAMES}
    assert len(set(pids.values())) == 3 and daemon.proc is not None and daemon.proc.pid not in pids.values()
    victim = pids["b"]
    os.kill(victim, signal.SIGSTOP)
    _approve(daemon, ids["b"])  # the step goes on: the daemon's next call waits on the stopped process
    wait_until(lambda: unread_messages(victim) > 0, 30, "b's step waiting in its driver process")
    os.kill(victim, signal.SIGKILL)
    failed = daemon.wait_state(ids["b"], "failed")
    assert failed["error"]["kind"] == "display_unavailable", failed["error"]
    assert failed["error"]["message"].startswith(f"the driver process (pid {victim}) of {seats.servers['b'].display} "
                                                 "ended during "), failed["error"]
    # The other seats' tasks go on, on their own driver processes.
    for name in ("a", "c"):
        _approve(daemon, ids[name])
        assert daemon.wait_state(ids[name], "succeeded")["seat"] == name
        assert seats.seat(name)["driver_pid"] == pids[name]
    # Seat b comes back with a new driver process and runs its next task there.
    wait_until(lambda: seats.seat("b")["state"] == "idle", 30, "seat b idle again")
    again = daemon.call("submit", prompt="on b again", seat="b")["id"]
    _approve(daemon, again)
    assert daemon.wait_state(again, "succeeded")["seat"] == "b"
    seats.recorders["b"].wait_text("?")
    assert seats.seat("b")["driver_pid"] not in (None, victim)
    assert held_state(seats.servers["b"].display) == ([], 0)
    # The driver processes end with the daemon.
    alive = [seats.seat(name)["driver_pid"] for name in NAMES]
    daemon.stop()
    for pid in alive:
        wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 30, f"driver process {pid} gone")


def test_a_seat_whose_display_is_gone_at_start_up_does_not_hold_the_daemon_back(short_tmp: Path) -> None:
    (short_tmp / "a").mkdir()
    (short_tmp / "b").mkdir()
    alive, gone = start_xvfb(short_tmp / "a"), start_xvfb(short_tmp / "b")
    gone.stop(keep_number=True)  # a display number this test chose and keeps: no server there, nobody else's
    model = ScriptedModel(scenario({"message": "done"}))
    daemon = Daemon("", model.start(), workdir=short_tmp, seats={"a": alive.display, "b": gone.display})
    try:
        daemon.start()
        seats = {s["name"]: s for s in daemon.call("seats")}
        assert seats["a"]["state"] == "idle" and seats["b"]["state"] == "unavailable"
        assert gone.display in seats["b"]["error"] and seats["b"]["size"] is None
        task_id = daemon.call("submit", prompt="anywhere")["id"]
        assert daemon.wait_state(task_id, "succeeded")["seat"] == "a"
        shot = cuctl(daemon.socket, "screenshot", "--seat", "b", "-o", str(short_tmp / "b.png"))
        assert shot.returncode == 2 and f"seat 'b' is unavailable: X display '{gone.display}'" in shot.stderr
    finally:
        daemon.stop()
        model.stop()
        alive.stop()
        gone.stop()


def test_an_old_database_upgrades_under_three_seats(short_tmp: Path) -> None:
    """cud 0.1's database (schema 2): its queued task runs on a seat, its history keeps its seat 'default'."""
    servers = {}
    model = ScriptedModel(scenario({"message": "done"}, look_first=True))
    daemon = None
    try:
        for name in NAMES:
            (short_tmp / name).mkdir()
            servers[name] = start_xvfb(short_tmp / name)
        workdir = short_tmp / "daemon"
        (workdir / "state").mkdir(parents=True)
        shutil.copy(DATA / "cud-v2.sqlite3", workdir / "state" / "cud.sqlite3")
        daemon = Daemon("", model.start(), workdir=workdir, seats={n: s.display for n, s in servers.items()})
        daemon.start()
        done, interrupted, queued = daemon.call("list")
        assert (done["state"], done["seat"]) == ("succeeded", "default")
        assert interrupted["state"] == "interrupted"  # it was running when 0.1 stopped
        ran = daemon.wait_state(queued["id"], "succeeded")
        assert ran["seat"] == "a" and ran["pinned"] is False and ran["prompt"] == "still queued"
        fresh = daemon.call("submit", prompt="new", seat="c")["id"]
        assert daemon.wait_state(fresh, "succeeded")["seat"] == "c" and fresh > queued["id"]
    finally:
        if daemon is not None:
            daemon.cleanup()
        model.stop()
        for server in servers.values():
            server.stop()


def test_a_client_of_the_old_protocol_is_told_to_use_the_daemons_cuctl(seats: Seats) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(seats.daemon.socket))
        sock.sendall(b'{"v": 1, "type": "ping"}\n')
        reply = sock.makefile("rb").readline()
    assert reply.startswith(b'{"v":1,"ok":false,')
    assert f"speaks {PROTOCOL_VERSION}: use the cuctl that came with the daemon".encode() in reply
    assert seats.daemon.call("ping")["protocol"] == PROTOCOL_VERSION
