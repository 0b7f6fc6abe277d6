"""A hung display under a running task: the task fails clearly, the daemon keeps answering, the next task runs.

The display's server (Xvfb for the X11 driver, TigerVNC's Xvnc for the VNC driver)
is stopped with SIGSTOP in the middle of a task and continued with SIGCONT later;
the daemon's driver_timeout is 1 s.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cud.protocol import PROTOCOL_VERSION
from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.recorder import wait_until
from tests.support.vnc import start_xvnc
from tests.support.xserver import start_xvfb

MOVES = scenario(*[{"actions": [{"type": "move", "x": 10 + n, "y": 10}]} for n in range(40)], {"message": "done"})


@pytest.fixture(params=["x11", "vnc"])
def hung(request: pytest.FixtureRequest, short_tmp: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Daemon]]:
    model = ScriptedModel({"name": "moves", "steps": MOVES["steps"]})
    if request.param == "x11":
        server = start_xvfb(short_tmp)
        proc, display, vnc = server.proc, server.display, None
    else:
        server = start_xvnc(short_tmp)
        password = short_tmp / "vnc-password"
        password.write_text(server.password)
        proc, display, vnc = server.proc, server.display, (server.server, password)
    daemon = Daemon(display, model.start(), max_steps=100, config="driver_timeout = 1\n", vnc=vnc)
    try:
        yield request.param, proc, daemon.start()
    finally:
        proc.send_signal(signal.SIGCONT)
        daemon.cleanup()
        model.stop()
        server.stop()


def test_a_stopped_display_fails_its_task_with_driver_timeout_and_the_next_task_runs(hung) -> None:
    kind, proc, daemon = hung
    # Moves 1 px apart on a screen they do not change: the stuck guard would ask after 5 (not what this tests).
    task_id = daemon.call("submit", prompt="move about", repeat_limit=0)["id"]
    wait_until(lambda: daemon.task(task_id)["steps"] >= 3, 60, "a few steps")
    proc.send_signal(signal.SIGSTOP)
    try:
        assert daemon.call("ping")["protocol"] == PROTOCOL_VERSION  # the event loop never waits on the display
        task = daemon.wait_state(task_id, "failed")
        assert task["error"]["kind"] == "driver_timeout", task["error"]
        where = daemon.args[daemon.args.index("--display" if kind == "x11" else "--vnc") + 1]
        assert where in task["error"]["message"] and "did not answer within 1 s" in task["error"]["message"]
        assert cuctl(daemon.socket, "list").returncode == 0
    finally:
        proc.send_signal(signal.SIGCONT)
    # The same daemon, no restart: the seat's driver reconnects on the next task's first call.
    again = daemon.call("submit", prompt="after the display came back", repeat_limit=0)["id"]
    assert daemon.wait_state(again, "succeeded", "failed")["state"] == "succeeded", daemon.task(again)
