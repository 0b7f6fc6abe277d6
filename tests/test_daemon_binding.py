"""Approval binding through blinking carets, and only through them.

An approved click into a text field whose caret blinks inside the compared
square must run, approved at any moment; a target covered, relabelled or moved
while the approval waited must be refused with no click delivered. The covered
case is in test_daemon_approvals.py; GTK's and Chromium's carets are in
test_apps_binding.py.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.drivers.x11 import X11Driver
from tests.support.daemon import APPROVALS, approve_each, scenario
from tests.support.xserver import XServer, stop_process


class TkForm:
    """tests/support/tk_form.py on a test display, read and steered through its pipes."""

    def __init__(self, display: str) -> None:
        app = Path(__file__).parent / "support" / "tk_form.py"
        self.proc = subprocess.Popen([sys.executable, str(app)], env={"DISPLAY": display, "PATH": "/usr/bin:/bin"},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        ready = self.next("ready")["ready"]
        self.entry, self.button = ready["entry"], ready["button"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def next(self, key: str, timeout: float = 30) -> dict[str, Any]:
        message = self.lines.get(timeout=timeout)
        assert key in message, f"expected {key!r} from the form, got {message}"
        return message

    def command(self, line: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        return self.next("done")

    def stop(self) -> None:
        stop_process(self.proc)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def form(xvfb: XServer) -> Iterator[TkForm]:
    app = TkForm(xvfb.display)
    yield app
    app.stop()


def centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2


def test_approved_clicks_next_to_a_blinking_tk_caret_are_never_refused(start_daemon, form: TkForm) -> None:
    x, y, _w, h = form.entry
    # The empty entry's caret sits at its left edge: well inside the square around the click.
    click = {"type": "click", "button": "left", "x": x + 8, "y": y + h // 2}
    daemon = start_daemon(scenario(*[{"actions": [click]}] * APPROVALS, {"message": "done"}), approval="actions")
    # The same click on an unchanged screen, 20 times, is the point here: the stuck guard is off.
    task_id = daemon.call("submit", prompt="click into the field, many times", repeat_limit=0, cycle_limit=0)["id"]
    approve_each(daemon, task_id, APPROVALS, seed=10)
    task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "succeeded", task["error"]


@pytest.mark.parametrize("change", ["relabel", "move"])
def test_a_relabelled_or_moved_button_is_refused_and_never_clicked(start_daemon, form: TkForm, xvfb: XServer,
                                                                   change: str) -> None:
    x, y = centre(form.button)
    click = {"type": "click", "button": "left", "x": x, "y": y}
    daemon = start_daemon(scenario({"actions": [click]}, {"message": "clicked"}), approval="actions")
    task_id = daemon.call("submit", prompt="press Cancel")["id"]
    approval = daemon.wait_approval(task_id)
    moved = form.command(change)["button"]
    daemon.call("approve", id=approval["id"])
    task = daemon.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "approval"
    assert f"the screen around ({x}, {y}) changed since it was approved" in task["error"]["message"]
    # Fence: press the button ourselves. Input reaches the form in order, so had the
    # daemon's click been sent, it would have been seen first.
    driver = X11Driver(xvfb.display)
    try:
        driver.click({"type": "click", "button": "left", "x": centre(moved)[0], "y": centre(moved)[1]})
    finally:
        driver.close()
    assert form.next("clicked") == {"clicked": "Delete" if change == "relabel" else "Cancel"}
    assert form.lines.empty()
