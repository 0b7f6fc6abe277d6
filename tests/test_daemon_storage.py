"""A full disk under the state directory: new work is refused, running work ends clearly, nothing is lost.

The state directory is a small tmpfs of the test's own (mounted as root, as CI
runs), filled up by a file the test writes until the kernel says ENOSPC.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from cud.scripted import ScriptedModel
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.recorder import Recorder

CHECK = {"code": "confirm", "message": "click?"}
TASK = scenario({"safety_checks": [CHECK], "actions": [{"type": "click", "button": "left", "x": 300, "y": 300}]},
                {"message": "clicked"})


@pytest.fixture
def small_disk_daemon(xvfb, recorder: Recorder) -> Iterator[Daemon]:
    model = ScriptedModel(TASK)
    daemon = Daemon(xvfb.display, model.start())
    daemon.state_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(daemon.state_dir)], check=True)
    try:
        yield daemon.start()
    finally:
        daemon.stop()
        subprocess.run(["umount", str(daemon.state_dir)], check=True)
        daemon.cleanup()
        model.stop()


def fill(directory: Path) -> Path:
    """Write a file until the disk is full; return it."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as fh:
        while True:
            try:
                fh.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                if len(chunk) == 1:
                    return filler
                chunk = chunk[: len(chunk) // 2]


def run_approved(daemon: Daemon, task_id: int) -> dict:
    approval = daemon.wait_approval(task_id)
    daemon.call("approve", id=approval["id"])
    return daemon.wait_state(task_id, "succeeded", "failed")


def test_a_full_disk_refuses_new_work_ends_running_work_clearly_and_loses_nothing(
        small_disk_daemon: Daemon, recorder: Recorder) -> None:
    daemon = small_disk_daemon
    first = daemon.call("submit", prompt="before")["id"]
    assert run_approved(daemon, first)["state"] == "succeeded"
    running = daemon.call("submit", prompt="while the disk fills")["id"]
    approval = daemon.wait_approval(running)

    filler = fill(daemon.state_dir)
    refused = cuctl(daemon.socket, "submit", "on a full disk")
    assert refused.returncode == 2
    assert f"the disk of the state directory '{daemon.state_dir}' is full; the task was not queued" in refused.stderr
    assert [t["id"] for t in daemon.call("list")] == [first, running]  # nothing half-queued; reads work
    assert cuctl(daemon.socket, "show", str(first)).returncode == 0

    # The approved click runs; the screenshot after it cannot be saved: the task fails, and says why.
    daemon.call("approve", id=approval["id"])
    task = daemon.wait_state(running, "failed")
    assert task["error"]["kind"] == "storage_full", task
    assert f"cannot save the screenshot of task {running} step 2" in task["error"]["message"]
    assert not list((daemon.state_dir / "trajectories" / str(running)).glob("step-0002*"))  # no half a file

    filler.unlink()
    again = daemon.call("submit", prompt="after")["id"]
    assert run_approved(daemon, again)["state"] == "succeeded"
    db = sqlite3.connect(daemon.state_dir / "cud.sqlite3")
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()
    shot = daemon.state_dir / "trajectories" / str(first) / "step-0001.png"
    with Image.open(shot) as image:
        image.load()  # the earlier record decodes whole
    assert daemon.task(first)["state"] == "succeeded" and daemon.task(first)["final_message"] == "clicked"
    assert os.path.exists(daemon.state_dir / ".space-reserve")
