"""The sandbox scripts, run as `make` runs them, on a private SANDBOX_DIR.

Every test brings the sandbox up in its own directory (never the developer's
.sandbox/), and stops what it started by the pids recorded there. Input only
ever goes to the displays a test started (the demo's, through the daemon).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.probes import rfb_security_types, x_connects
from tests.support.recorder import wait_until

ROOT = Path(__file__).resolve().parent.parent
SANDBOX = ROOT / "sandbox"
PARTS = ("xserver", "session-bus", "a11y-bus", "openbox", "x11vnc", "demo-app", "model", "daemon")
SEAT_PARTS = ("xserver", "session-bus", "a11y-bus", "openbox", "x11vnc", "demo-app")
VENV = Path(sys.executable).parent.parent


def _load_procs() -> Any:
    spec = importlib.util.spec_from_file_location("sandbox_procs", SANDBOX / "procs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["sandbox_procs"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


procs = _load_procs()


class Sandbox:
    def __init__(self, directory: Path, **env: str) -> None:
        self.dir = directory
        # As root the seats' users (sandbox/seat_sessions.py) must reach their homes and buses under it.
        directory.parent.chmod(0o711)
        unset = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "MODEL", "SANDBOX", "SEATS")
        self.env = {k: v for k, v in os.environ.items() if k not in unset}
        self.env.update(SANDBOX_DIR=str(directory), VENV=str(VENV), **env)

    def run(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SANDBOX / script)], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=ROOT)

    def records(self) -> dict[str, Any]:
        """Every part recorded (one seat's plain names, or seatK.xserver ...), by name."""
        found = {}
        for path in sorted((self.dir / "run").glob("*.json")):
            if path.name != "sandbox.json":
                found[path.stem] = procs.load(self.dir / "run", path.stem)
        return found

    def pids(self) -> dict[str, int]:
        return {name: record.pid for name, record in self.records().items()}

    def kill_leftovers(self) -> None:
        for record in self.records().values():
            if procs.state_of(record) == "running":
                os.kill(record.pid, signal.SIGKILL)


@pytest.fixture
def sandbox(short_tmp: Path) -> Iterator[Sandbox]:
    box = Sandbox(short_tmp / "sb")
    yield box
    box.run("down.sh")
    box.kill_leftovers()


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"rc {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout




def test_deps_lists_the_debian_packages_one_a_line() -> None:
    listed = ok(subprocess.run([str(SANDBOX / "deps.sh"), "--list"], capture_output=True, text=True)).split("\n")
    packages = [line for line in listed if line]
    assert all(p == p.strip() and " " not in p for p in packages)
    for needed in ("xvfb", "x11vnc", "openbox", "python3-tk", "python3-venv", "tigervnc-standalone-server", "systemd"):
        assert needed in packages
    assert len(set(packages)) == len(packages)
    assert subprocess.run([str(SANDBOX / "deps.sh"), "--bogus"], capture_output=True).returncode == 2


def test_deps_profiles_add_their_packages_to_the_default_list_once() -> None:
    default = ok(subprocess.run([str(SANDBOX / "deps.sh"), "--list"], capture_output=True, text=True)).split()
    assert "libreoffice-calc" not in default and "vlc" not in default  # the demo stays light
    for profile, added in (("test", {"gimp", "libreoffice-calc", "libreoffice-impress", "libreoffice-writer", "vlc",
                                     "wmctrl"}),
                           ("osworld", {"libreoffice-calc", "libreoffice-impress", "libreoffice-writer", "gimp",
                                        "vlc", "thunderbird", "wmctrl", "socat", "python-is-python3"})):
        listed = ok(subprocess.run([str(SANDBOX / "deps.sh"), "--profile", profile, "--list"],
                                   capture_output=True, text=True)).split()
        assert listed[:len(default)] == default and added <= set(listed[len(default):])
        assert len(set(listed)) == len(listed)
    refused = subprocess.run([str(SANDBOX / "deps.sh"), "--profile", "bogus", "--list"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--profile test|osworld" in refused.stderr


def test_up_demo_status_down_leave_nothing_running(sandbox: Sandbox) -> None:
    out = ok(sandbox.run("up.sh"))
    assert "SCRIPTED" in out, out  # no key: the model is scripted, and it is said
    records = sandbox.records()
    assert set(records) == set(PARTS)
    assert all(procs.state_of(r) == "running" for r in records.values())
    display = records["xserver"].info["display"]
    # The display is not open to everyone: only with the sandbox's cookie.
    assert x_connects(display, sandbox.dir / "Xauthority")
    assert not x_connects(display, "/nonexistent")
    port = int(records["x11vnc"].info["vnc_port"])
    assert rfb_security_types(port) == [2]  # a password, not an open VNC
    with pytest.raises(OSError):
        # Bound to loopback only: not reachable on another local address.
        socket.create_connection(("127.0.0.2", port), timeout=5).close()
    assert (sandbox.dir / "cud.sock").exists()
    # The summary's PATH line, followed in a shell with only the system's PATH from where make ran,
    # lets cuctl be typed bare as the README's examples do.
    (export,) = [line.split("(bare cuctl, as in the README: ")[1][:-1] for line in out.splitlines()
                 if "(bare cuctl, as in the README: " in line]
    bare = subprocess.run(["sh", "-c", f"{export}\ncuctl --socket {sandbox.dir / 'cud.sock'} list"], cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")}, capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode == 0 and bare.stdout.startswith("ID  STATE"), f"{export}: {bare.stdout}{bare.stderr}"
    # Without --socket or $CUD_SOCKET, a cuctl that cannot reach its default names the sandbox's socket.
    env = {k: v for k, v in os.environ.items() if k != "CUD_SOCKET"}
    lost = subprocess.run([str(VENV / "bin" / "cuctl"), "list"], env={**env, "SANDBOX_DIR": str(sandbox.dir)},
                          cwd=sandbox.dir.parent, capture_output=True, text=True, timeout=60)
    assert lost.returncode == 2 and "name the daemon's socket with --socket PATH or CUD_SOCKET=PATH (a sandbox's " \
        f"daemon listens on '{sandbox.dir.name}/cud.sock')" in lost.stderr, lost.stderr

    # Idempotent: a second up changes nothing.
    before = sandbox.pids()
    again = ok(sandbox.run("up.sh"))
    assert "already up" in again and sandbox.pids() == before

    # The demo, end to end through the scripted model, with its approval.
    demo = ok(sandbox.run("demo.sh"))
    assert "SCRIPTED" in demo and "approve" in demo
    assert "press Approve in the browser:" in demo and " console (it prints the page's address)" in demo
    assert "the demo app received: 'Hello from cud — ✓ ü €'" in demo, demo
    assert "succeeded" in demo

    status = sandbox.run("status.sh")
    assert status.returncode == 0 and "answers ping" in status.stdout

    down = ok(sandbox.run("down.sh"))
    for name, record in records.items():
        assert procs.state_of(record) != "running", f"{name} (pid {record.pid}) still runs after down:\n{down}"
    assert not (sandbox.dir / "cud.sock").exists()
    assert sandbox.records() == {}
    assert "not running" in ok(sandbox.run("status.sh"))
    assert (sandbox.dir / "logs" / "daemon.log").exists()  # logs stay for reading


def test_up_repairs_a_dead_part_and_only_that_part(sandbox: Sandbox) -> None:
    ok(sandbox.run("up.sh"))
    before = sandbox.pids()
    app = sandbox.records()["demo-app"]
    os.kill(app.pid, signal.SIGKILL)
    wait_until(lambda: procs.state_of(app) != "running", 10, "the demo app to die")

    status = sandbox.run("status.sh")
    assert status.returncode == 1 and "DEAD" in status.stdout

    out = ok(sandbox.run("up.sh"))
    assert "demo-app: started" in out
    after = sandbox.pids()
    assert after["demo-app"] != before["demo-app"]
    assert {k: v for k, v in after.items() if k != "demo-app"} == {k: v for k, v in before.items() if k != "demo-app"}, out


def test_a_dead_x_server_restarts_everything_drawn_on_it(sandbox: Sandbox) -> None:
    ok(sandbox.run("up.sh"))
    before = sandbox.records()
    os.kill(before["xserver"].pid, signal.SIGKILL)
    wait_until(lambda: procs.state_of(before["xserver"]) != "running", 10, "the X server to die")
    ok(sandbox.run("up.sh"))
    after = sandbox.pids()
    for name in ("xserver", "a11y-bus", "openbox", "x11vnc", "demo-app", "daemon"):
        assert after[name] != before[name].pid, name
    for name in ("model", "session-bus"):  # they do not need the display
        assert after[name] == before[name].pid, name
    for record in before.values():
        if record.name not in ("model", "session-bus"):
            assert procs.state_of(record) != "running", f"{record.name} from the old display still runs"
    assert "answers ping" in ok(sandbox.run("status.sh"))


def test_down_never_signals_a_pid_that_is_not_the_recorded_program(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb")
    run_dir = box.dir / "run"
    sleepers = [subprocess.Popen(["sleep", "300"]) for _ in range(3)]
    try:
        real = [procs.Record("x", p.pid, ["sleep", "300"], procs._stat(p.pid)[1], "log") for p in sleepers]
        # A pid now running another program, and the same program started at another time: left alone.
        procs.save(run_dir, procs.Record("openbox", real[0].pid, ["openbox", "--sm-disable"], real[0].start_time, "l"))
        procs.save(run_dir, procs.Record("x11vnc", real[1].pid, real[1].cmdline, real[1].start_time + 1, "l"))
        # The control: the exact record is stopped, so the two above were spared on purpose.
        procs.save(run_dir, procs.Record("model", real[2].pid, real[2].cmdline, real[2].start_time, "l"))
        out = ok(box.run("down.sh"))
        assert "left alone" in out
        assert sleepers[2].wait(timeout=30) == -signal.SIGTERM
        assert sleepers[0].poll() is None and sleepers[1].poll() is None
        assert box.records() == {}
    finally:
        for proc in sleepers:
            proc.kill()
            proc.wait()


def test_a_model_change_restarts_the_daemon_on_the_real_api(sandbox: Sandbox) -> None:
    ok(sandbox.run("up.sh"))
    before = sandbox.records()
    # With a key the scripted model goes away and the daemon is started for the real API
    # (never contacted here: nothing is submitted).
    sandbox.env["OPENAI_API_KEY"] = "sk-test-not-a-real-key"
    out = ok(sandbox.run("up.sh"))
    assert "restarting the model and the daemon" in out and "the OpenAI API" in out
    after = sandbox.records()
    assert "model" not in after and procs.state_of(before["model"]) != "running"
    assert after["daemon"].pid != before["daemon"].pid and after["daemon"].info["model"] == "openai"
    assert after["xserver"].pid == before["xserver"].pid
    daemon_env = Path(f"/proc/{after['daemon'].pid}/environ").read_bytes().split(b"\0")
    assert b"OPENAI_BASE_URL=" not in b"\n".join(daemon_env)  # the scripted model's URL is gone


def test_model_claude_runs_the_demo_through_the_scripted_messages_api_without_an_openai_key(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", MODEL="claude")
    try:
        out = ok(box.run("up.sh"))
        assert "SCRIPTED over Anthropic's Messages API (MODEL=claude)" in out, out
        records = box.records()
        assert records["daemon"].info["api"] == "messages" and "--api messages" in " ".join(records["model"].cmdline)
        config = tomllib.loads((box.dir / "cud.toml").read_text())
        port = records["model"].info["port"]
        assert config["models"] == {"claude": {"api": "anthropic", "model": "claude-sonnet-4-5",
                                               "base_url": f"http://127.0.0.1:{port}"}}
        daemon_env = Path(f"/proc/{records['daemon'].pid}/environ").read_bytes().split(b"\0")
        assert not any(v.startswith((b"OPENAI_API_KEY=", b"OPENAI_BASE_URL=")) for v in daemon_env)  # none needed
        demo = ok(box.run("demo.sh"))
        assert "MODEL=claude and ANTHROPIC_API_KEY is not set: the model is SCRIPTED" in demo, demo
        assert "(--approval actions)" in demo and "asks for approval" in demo, demo
        assert "the demo app received: 'Hello from cud — ✓ ü €'" in demo, demo
        assert "succeeded" in demo and "reminder: the model was SCRIPTED (no ANTHROPIC_API_KEY)" in demo, demo
        (task,) = json.loads(subprocess.run([str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"),
                                             "list", "--json"], capture_output=True, text=True, timeout=60).stdout)
        assert task["model"] == "claude" and task["state"] == "succeeded", task
        # Without MODEL the next up goes back to the Responses API's scripted model.
        del box.env["MODEL"]
        again = ok(box.run("up.sh"))
        assert "restarting the model and the daemon" in again and box.records()["daemon"].info["api"] == "responses"
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_xvnc_sandbox(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SANDBOX="xvnc")
    try:
        out = ok(box.run("up.sh"))
        records = box.records()
        assert "x11vnc" not in records and "Xvnc" in out
        assert rfb_security_types(int(records["xserver"].info["vnc_port"])) == [2]
        assert not x_connects(records["xserver"].info["display"], "/nonexistent")
        assert "succeeded" in ok(box.run("demo.sh"))
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_status_and_down_without_a_sandbox(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "none")
    assert "not running" in ok(box.run("status.sh"))
    assert "nothing" in ok(box.run("down.sh"))
    assert not (short_tmp / "none").exists()
    # The record format is what down relies on; a corrupt one is reported, not guessed at.
    (short_tmp / "bad" / "run").mkdir(parents=True)
    (short_tmp / "bad" / "run" / "daemon.json").write_text(json.dumps({"pid": 1}))
    bad = Sandbox(short_tmp / "bad").run("down.sh")
    assert bad.returncode == 1 and "not a sandbox record" in bad.stdout


# -- several seats: SEATS=N --------------------------------------------------------------------------
SCREEN_PROBE = """
import json, sys
from Xlib import X, display, error
d = display.Display(sys.argv[1])
root = d.screen().root
wm = root.get_full_property(d.intern_atom("_NET_SUPPORTING_WM_CHECK"), X.AnyPropertyType)
titles, pending = [], [root]
while pending:
    window = pending.pop()
    try:
        titles.append(window.get_wm_name())
        pending.extend(window.query_tree().children)
    except error.XError:
        pass
pixels = root.get_image(0, 0, 8, 8, X.ZPixmap, 0xFFFFFFFF).data
print(json.dumps({"size": [d.screen().width_in_pixels, d.screen().height_in_pixels], "wm": bool(wm and wm.value),
                  "titles": [t for t in titles if isinstance(t, str)], "pixels": len(pixels)}))
"""


def screen(display: str, xauthority: Path) -> dict[str, Any]:
    """What a client holding the sandbox's cookie sees on ``display`` (size, WM, window titles, pixels)."""
    result = subprocess.run([sys.executable, "-c", SCREEN_PROBE, display], capture_output=True, text=True,
                            env={**os.environ, "XAUTHORITY": str(xauthority)}, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def check_seats(box: Sandbox, count: int) -> dict[str, str]:
    """N private displays, each with its own openbox, view-only x11vnc and demo app; returns seat -> display."""
    records = box.records()
    seats = [f"seat{k}" for k in range(1, count + 1)]
    assert {name for name in records if "." in name} == {f"{seat}.{kind}" for seat in seats for kind in SEAT_PARTS}
    assert not set(SEAT_PARTS) & set(records)  # one seat's plain names are not used
    displays: dict[str, str] = {}
    ports = set()
    cookie = box.dir / "Xauthority"
    for seat in seats:
        mine = {kind: records[f"{seat}.{kind}"] for kind in SEAT_PARTS}
        assert all(procs.state_of(r) == "running" for r in mine.values()), seat
        display = displays[seat] = mine["xserver"].info["display"]
        assert "-displayfd" in mine["xserver"].cmdline  # the server chose its number
        assert x_connects(display, cookie) and not x_connects(display, "/nonexistent")
        # Its server's own cookie opens it, and no other seat's display (one cookie per server).
        own = Path(mine["xserver"].info["xauthority"])
        assert x_connects(display, own)
        for other in seats:
            if other != seat:
                assert not x_connects(records[f"{other}.xserver"].info["display"], own), (seat, other)
        seen = screen(display, cookie)
        assert seen["size"] == [1280, 800] and seen["pixels"] > 0
        assert seen["wm"], f"{seat}: no window manager on {display}"
        assert "cud demo" in seen["titles"], f"{seat}: no demo app on {display}: {seen['titles']}"
        # Each seat's openbox, x11vnc and app are the ones drawn on its own display.
        for kind in ("openbox", "demo-app"):
            assert environ(mine[kind].pid)["DISPLAY"] == display, (seat, kind)
        watcher = mine["x11vnc"]
        assert watcher.cmdline[watcher.cmdline.index("-display") + 1] == display and "-viewonly" in watcher.cmdline
        port = int(watcher.info["vnc_port"])
        ports.add(port)
        assert rfb_security_types(port) == [2]
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", port), timeout=5).close()  # loopback only
    assert len(set(displays.values())) == count and len(ports) == count
    return displays


def check_daemon_seats(box: Sandbox, displays: dict[str, str]) -> None:
    """The one daemon drives every seat: its config and `cuctl seats --json` name each display."""
    daemon = box.records()["daemon"]
    assert procs.state_of(daemon) == "running"
    config = tomllib.loads((box.dir / "cud.toml").read_text())
    assert [(seat["name"], seat["display"]) for seat in config["seats"]] == list(displays.items())
    listed = json.loads(ok(subprocess.run([str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"),
                                           "seats", "--json"], capture_output=True, text=True, timeout=60)))
    assert [(seat["name"], seat.get("display")) for seat in listed] == list(displays.items())
    assert all(seat["state"] == "idle" and seat["size"] == [1280, 800] and seat["error"] is None for seat in listed)
    # Each seat's user opens its own display and no other seat's (the daemon gives it its display's cookie only).
    for seat, display in displays.items():
        for other in displays.values():
            done = subprocess.run([str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"), "exec", seat,
                                   "--", "xdpyinfo", "-display", other], capture_output=True, text=True, timeout=60)
            assert (done.returncode == 0) == (other == display), (seat, other, done.stdout, done.stderr)


def received(box: Sandbox, seat: str) -> list[str]:
    lines = (box.dir / f"{seat}.demo-app.jsonl").read_text(encoding="utf-8").splitlines()
    return [event["text"] for event in map(json.loads, lines) if event.get("event") == "received"]


def test_two_seats_up_demo_status_down(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SEATS="2")
    try:
        out = ok(box.run("up.sh"))
        displays = check_seats(box, 2)
        for seat, display in displays.items():
            # The summary says where to watch each seat.
            port = box.records()[f"{seat}.x11vnc"].info["vnc_port"]
            assert f"{seat}    display {display}, watch:" in out and f"localhost::{port}" in out, out

        status = box.run("status.sh")
        for seat, display in displays.items():
            port = box.records()[f"{seat}.x11vnc"].info["vnc_port"]
            assert f"{seat}     display {display}, VNC localhost::{port}" in status.stdout, status.stdout

        assert status.returncode == 0 and "answers ping" in status.stdout, status.stdout
        assert "the daemon's seats (cuctl seats)" in status.stdout
        check_daemon_seats(box, displays)
        before = box.pids()
        assert "already up" in ok(box.run("up.sh")) and box.pids() == before

        # The demo pins its task to seat1: the text reaches seat1's app and nothing reaches seat2's.
        demo = ok(box.run("demo.sh"))
        assert "pinned to the first, seat1" in demo and "succeeded on seat seat1" in demo, demo
        assert "the demo app received: 'Hello from cud — ✓ ü €'" in demo, demo
        assert received(box, "seat1") == ["Hello from cud — ✓ ü €"] and received(box, "seat2") == []

        records = box.records()
        # down goes by the records, whatever SEATS says now (even nonsense).
        box.env["SEATS"] = "nonsense"
        down = ok(box.run("down.sh"))
        for name, record in records.items():
            assert procs.state_of(record) != "running", f"{name} (pid {record.pid}) still runs after down:\n{down}"
        assert box.records() == {} and not (box.dir / "cud.sock").exists()
        assert "not running" in ok(box.run("status.sh"))
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_seats_come_and_go_and_a_dead_display_restarts_only_its_seat(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SEATS="2")
    try:
        ok(box.run("up.sh"))
        first = box.records()
        # seat2's X server dies: its seat and the daemon (whose config names the display) restart,
        # seat1 keeps running, and the cookie it was started with still lets clients in.
        os.kill(first["seat2.xserver"].pid, signal.SIGKILL)
        wait_until(lambda: procs.state_of(first["seat2.xserver"]) != "running", 10, "seat2's X server to die")
        ok(box.run("up.sh"))
        second = box.pids()
        for kind in SEAT_PARTS:
            assert second[f"seat1.{kind}"] == first[f"seat1.{kind}"].pid, kind
            if kind != "session-bus":  # the one part of a seat that does not need its display
                assert second[f"seat2.{kind}"] != first[f"seat2.{kind}"].pid, kind
        assert second["model"] == first["model"].pid
        assert second["daemon"] != first["daemon"].pid
        displays = check_seats(box, 2)

        # A third seat joins; the first two keep running.
        box.env["SEATS"] = "3"
        out = ok(box.run("up.sh"))
        assert "SEATS=3 now" in out
        third = box.pids()
        assert all(third[name] == pid for name, pid in second.items() if name != "daemon")
        displays = check_seats(box, 3)
        check_daemon_seats(box, displays)

        # And leaves again: exactly its parts stop, and the daemon forgets it.
        gone = {name: record for name, record in box.records().items() if name.startswith("seat3.")}
        box.env["SEATS"] = "2"
        ok(box.run("up.sh"))
        assert all(procs.state_of(record) != "running" for record in gone.values())
        fourth = box.pids()
        assert set(fourth) == set(second) and all(fourth[n] == third[n] for n in second if n != "daemon")
        displays = check_seats(box, 2)
        check_daemon_seats(box, displays)
        assert fourth["daemon"] != third["daemon"]
    finally:
        box.run("down.sh")
        box.kill_leftovers()


@pytest.mark.parametrize("bad", ["0", "-1", "two", "2.5", "17", "١"])
def test_a_bad_seat_count_is_refused_by_name_before_anything_starts(short_tmp: Path, bad: str) -> None:
    box = Sandbox(short_tmp / "sb", SEATS=bad)
    result = box.run("up.sh")
    assert result.returncode == 1 and "SEATS must be a whole number from 1 to 16" in result.stdout
    assert repr(bad) in result.stdout, result.stdout
    assert box.records() == {} and not (box.dir / "logs").exists()


def test_xvnc_sandbox_with_two_seats(short_tmp: Path) -> None:
    box = Sandbox(short_tmp / "sb", SANDBOX="xvnc", SEATS="2")
    try:
        ok(box.run("up.sh"))
        records = box.records()
        assert not any(name.endswith("x11vnc") for name in records)  # Xvnc serves VNC itself
        ports = {seat: int(records[f"{seat}.xserver"].info["vnc_port"]) for seat in ("seat1", "seat2")}
        assert len(set(ports.values())) == 2
        for seat, port in ports.items():
            assert rfb_security_types(port) == [2]
            assert not x_connects(records[f"{seat}.xserver"].info["display"], "/nonexistent")
        # The daemon drives both over VNC, as with one seat: its config names each server.
        config = (box.dir / "cud.toml").read_text()
        for seat, port in ports.items():
            assert f'name = "{seat}"\nvnc = "127.0.0.1::{port}"' in config
        listed = json.loads(ok(subprocess.run(
            [str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock"), "seats", "--json"],
            capture_output=True, text=True, timeout=60)))
        assert [(s["name"], s.get("vnc")) for s in listed] == [(k, f"127.0.0.1::{p}") for k, p in ports.items()]
        demo = ok(box.run("demo.sh"))
        assert "succeeded on seat seat1" in demo and received(box, "seat2") == []
    finally:
        box.run("down.sh")
        box.kill_leftovers()


def test_up_again_after_down_once_another_user_took_the_seat_users_uid(sandbox: Sandbox) -> None:
    """Issue 35: sandbox-down removed the seat's user but left its uid on files; the next system user made
    took that uid, and the next sandbox-up failed, half up, binding the accessibility bus's socket."""
    ok(sandbox.run("up.sh"))
    seat_user = json.loads((sandbox.dir / "seat-users.json").read_text())
    (name,) = seat_user
    uid = int(subprocess.run(["id", "-u", name], capture_output=True, text=True, check=True).stdout)
    # What the seat user leaves where anyone may write, and a link of its own that must be removed as nothing else.
    left = [Path(f"/tmp/{sandbox.dir.parent.name}-left"), Path(f"/dev/shm/{sandbox.dir.parent.name}-left")]
    left[0].write_text("x")
    (Path("/var/tmp") / f"{sandbox.dir.parent.name}-dir").mkdir()
    left.append(Path("/var/tmp") / f"{sandbox.dir.parent.name}-dir")
    left[1].write_text("x")
    link = Path(f"/tmp/{sandbox.dir.parent.name}-link")
    link.symlink_to(sandbox.dir / "Xauthority")
    for path in (*left, link):
        os.lchown(path, uid, uid)
    # What an earlier sandbox left: its buses' directories, the seat user's.
    for path in (sandbox.dir / "a11y", sandbox.dir / "a11y" / "at-spi", sandbox.dir / "a11y" / "dconf"):
        os.chown(path, uid, uid)
        path.chmod(0o700)
    try:
        down = ok(sandbox.run("down.sh"))
        assert f"seat user {name}: removed" in down, down
        assert not any(path.exists() for path in left), [str(p) for p in left if p.exists()]
        assert link.is_symlink() and (sandbox.dir / "Xauthority").exists()  # a link: neither it nor its target
        assert not (sandbox.dir / "a11y").exists() and not (sandbox.dir / "session").exists()
        # Another system user takes the uid, and leaves a directory of its own where the sandbox's was.
        subprocess.run(["useradd", "--system", "--no-create-home", "-u", str(uid), "cud-t35-uid"], check=True)
        (sandbox.dir / "a11y" / "at-spi").mkdir(parents=True)
        for path in (sandbox.dir / "a11y", sandbox.dir / "a11y" / "at-spi"):
            os.chown(path, uid, uid)
            path.chmod(0o700)
        again = ok(sandbox.run("up.sh"))
        assert "a11y-bus: started" in again and "daemon: started" in again, again
        for path in (sandbox.dir / "a11y", sandbox.dir / "a11y" / "at-spi"):
            info = path.lstat()
            assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o755), path
        assert all(procs.state_of(r) == "running" for r in sandbox.records().values())
    finally:
        link.unlink(missing_ok=True)
        for path in left:
            if path.is_dir():
                path.rmdir()
            else:
                path.unlink(missing_ok=True)
        subprocess.run(["userdel", "cud-t35-uid"], capture_output=True)


def test_up_with_the_users_config_and_scenarios(short_tmp: Path) -> None:
    """Issue 35: `make sandbox-up CONFIG=my.toml SCENARIOS=dir/`: the daemon takes the user's config, merged with
    the sandbox's keys, and the scripted model plays the user's scenario for a task whose model is scripted:NAME."""
    mine = short_tmp / "mine"
    mine.mkdir()
    (mine / "hello.json").write_text(json.dumps({"name": "hello", "steps": [{"message": "hello from SCENARIOS"}]}))
    config = short_tmp / "my.toml"
    # Top-level keys and tables of the user's own; its own [video] stands in for the sandbox's.
    config.write_text("# mine\nmax_steps = 7\n\n[video]\nenabled = false\n")
    # A key the sandbox sets itself is refused by name, before anything starts.
    clash = short_tmp / "clash.toml"
    clash.write_text('display = ":9"\n')
    box = Sandbox(short_tmp / "sb", CONFIG=str(clash), SCENARIOS=str(mine))
    try:
        refused = box.run("up.sh")
        assert refused.returncode == 1 and f"CONFIG '{clash}' sets 'display', which the sandbox sets itself" \
            in refused.stdout, refused.stdout + refused.stderr
        assert not (box.dir / "run").exists()
        box.env["CONFIG"] = str(config)
        out = ok(box.run("up.sh"))
        assert f"with CONFIG={config} merged in" in out and f"SCENARIOS={mine}" in out, out
        assert f"DISPLAY={box.records()['xserver'].info['display']} XAUTHORITY=" in out, out
        assert "already up" in ok(box.run("up.sh"))  # the same CONFIG and SCENARIOS again: nothing restarts
        merged = tomllib.loads((box.dir / "cud.toml").read_text())
        assert merged["max_steps"] == 7 and merged["video"] == {"enabled": False} and "session_bus" in merged
        cuctl = [str(VENV / "bin" / "cuctl"), "--socket", str(box.dir / "cud.sock")]
        submitted = ok(subprocess.run([*cuctl, "--json", "submit", "--model", "scripted:hello", "--wait", "say hello"],
                                      capture_output=True, text=True, timeout=120))
        task = json.loads(submitted.strip().splitlines()[-1])
        shown = json.loads(ok(subprocess.run([*cuctl, "--json", "show", str(task["id"])], capture_output=True,
                                             text=True, timeout=60)))
        assert shown["state"] == "succeeded" and "hello from SCENARIOS" in json.dumps(shown), shown
        assert shown["max_steps"] == 7, shown  # the user's config's default
    finally:
        box.run("down.sh")
        box.kill_leftovers()
