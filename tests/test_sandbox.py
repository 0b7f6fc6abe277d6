"""The sandbox scripts, run as `make` runs them, on a private SANDBOX_DIR.

Every test brings the sandbox up in its own directory (never the developer's
.sandbox/), and stops what it started by the pids recorded there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.probes import rfb_security_types, x_connects
from tests.support.recorder import wait_until

ROOT = Path(__file__).resolve().parent.parent
SANDBOX = ROOT / "sandbox"
PARTS = ("xserver", "openbox", "x11vnc", "demo-app", "model", "daemon")


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
        self.env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SANDBOX")}
        self.env.update(SANDBOX_DIR=str(directory), VENV=str(Path(sys.executable).parent.parent), **env)

    def run(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SANDBOX / script)], env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, cwd=ROOT)

    def records(self) -> dict[str, Any]:
        found = {}
        for name in PARTS:
            record = procs.load(self.dir / "run", name)
            if record is not None:
                found[name] = record
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

    # Idempotent: a second up changes nothing.
    before = sandbox.pids()
    again = ok(sandbox.run("up.sh"))
    assert "already up" in again and sandbox.pids() == before

    # The demo, end to end through the scripted model, with its approval.
    demo = ok(sandbox.run("demo.sh"))
    assert "SCRIPTED" in demo and "approve" in demo
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
    assert {k: v for k, v in after.items() if k != "demo-app"} == {k: v for k, v in before.items() if k != "demo-app"}


def test_a_dead_x_server_restarts_everything_drawn_on_it(sandbox: Sandbox) -> None:
    ok(sandbox.run("up.sh"))
    before = sandbox.records()
    os.kill(before["xserver"].pid, signal.SIGKILL)
    wait_until(lambda: procs.state_of(before["xserver"]) != "running", 10, "the X server to die")
    ok(sandbox.run("up.sh"))
    after = sandbox.pids()
    for name in ("xserver", "openbox", "x11vnc", "demo-app", "daemon"):
        assert after[name] != before[name].pid, name
    assert after["model"] == before["model"].pid  # it does not need the display
    for record in before.values():
        if record.name != "model":
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
