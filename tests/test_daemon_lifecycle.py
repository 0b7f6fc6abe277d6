"""Crash, restart, stop, and the sd_notify conversation with a real datagram socket."""

from __future__ import annotations

import logging
import socket
import tempfile
from pathlib import Path

import pytest

from daemon.server.systemd_notify import Notifier
from tests.support.daemon import Daemon, scenario
from tests.support.recorder import Recorder, wait_until

SLOW = scenario({"actions": [{"type": "wait"}], "delay": 60}, {"message": "done"})


def test_kill_9_mid_task_then_restart_loses_nothing(start_daemon, xvfb, recorder: Recorder) -> None:
    daemon: Daemon = start_daemon(SLOW)
    running = daemon.call("submit", prompt="slow one")["id"]
    queued = [daemon.call("submit", prompt=f"queued {n}")["id"] for n in range(2)]
    wait_until(lambda: any("previous_response_id" in r for r in daemon.model.requests), 30, "the task to be mid-run")
    daemon.kill9()

    # Same state dir and socket path; this time a model that answers at once.
    fast = start_daemon(scenario({"actions": [{"type": "type", "text": "é"}]}, {"message": "done"}),
                        workdir=daemon.dir)
    task = fast.task(running)
    assert task["state"] == "interrupted" and "daemon stopped while the task was running" in task["reason"]
    assert task["prompt"] == "slow one" and task["started_at"] is not None
    for task_id in queued:
        assert fast.wait_state(task_id, "succeeded")["final_message"] == "done"
    recorder.wait_text("éé")
    assert [t["id"] for t in fast.call("list")] == [running, *queued]
    kinds = [e["kind"] for e in fast.events(running)]
    assert kinds[:2] == ["queued", "running"] and kinds[-1] == "end"


def test_sigterm_interrupts_the_running_task_with_a_reason_and_exits_cleanly(start_daemon) -> None:
    daemon: Daemon = start_daemon(SLOW)
    task_id = daemon.call("submit", prompt="slow")["id"]
    daemon.wait_state(task_id, "running")
    assert daemon.stop() == 0
    assert not daemon.socket.exists()
    restarted = start_daemon(scenario({"message": "x"}), workdir=daemon.dir)
    task = restarted.task(task_id)
    assert task["state"] == "interrupted" and "the daemon was stopped (SIGTERM)" in task["reason"]


def test_ready_watchdog_while_a_task_runs_and_stopping(start_daemon) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cud-n-", dir="/tmp"))
    address = folder / "notify"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(address))
    listener.settimeout(0.05)
    received: list[str] = []

    def drain() -> list[str]:
        while True:
            try:
                received.extend(listener.recv(4096).decode().split("\n"))
            except TimeoutError:
                return received

    try:
        daemon: Daemon = start_daemon(
            # The model's answer never comes within the test: the task runs until the daemon stops.
            scenario({"actions": [{"type": "wait"}], "delay": 3600}, {"message": "done"}),
            extra_env={"NOTIFY_SOCKET": str(address), "WATCHDOG_USEC": "200000"},
        )
        wait_until(lambda: "READY=1" in drain(), 10, "READY=1")
        assert any(line.startswith("STATUS=serving") for line in received)
        task_id = daemon.call("submit", prompt="slow model")["id"]
        daemon.wait_state(task_id, "running")
        before = received.count("WATCHDOG=1")
        # While the model holds its answer, the event loop must keep feeding the watchdog.
        wait_until(lambda: drain().count("WATCHDOG=1") >= before + 3, 10, "watchdog pings during the task")
        assert daemon.task(task_id)["state"] == "running"
        daemon.stop()
        wait_until(lambda: "STOPPING=1" in drain(), 10, "STOPPING=1")
    finally:
        listener.close()
        address.unlink(missing_ok=True)
        folder.rmdir()


def test_a_notify_socket_that_is_gone_is_logged_under_the_module_s_name(caplog: pytest.LogCaptureFixture) -> None:
    """systemd restarting (nothing bound at NOTIFY_SOCKET) is a warning from cud.systemd_notify, not an error."""
    folder = Path(tempfile.mkdtemp(prefix="cud-n-", dir="/tmp"))
    try:
        caplog.set_level(logging.WARNING, logger="cud.systemd_notify")
        Notifier({"NOTIFY_SOCKET": str(folder / "gone")}).ready("serving")
        assert [(r.name, r.getMessage().split(":")[0]) for r in caplog.records] == [
            ("cud.systemd_notify", "sd_notify READY failed")]
    finally:
        folder.rmdir()
