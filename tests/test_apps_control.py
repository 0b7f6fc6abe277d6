"""Take over on real applications: a person's typing while a task is paused reaches GTK, Chromium and xterm exactly.

The model clicks into the application's text input (an approval holds it there);
the task is paused at that batch's boundary, a person types mixed text with
``cuctl act`` through the daemon, and the task resumes. What the application
holds is read from the application itself (its probe), not from our own window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cud.scripted import ScriptedModel
from tests.support.apps import app_class
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.desktop import start_desktop
from tests.support.recorder import wait_until

MIXED = "Grüße, 12 €! ½"


@pytest.mark.parametrize("app_name", ["gtk", "chromium", "xterm"])
def test_a_persons_typing_while_paused_reaches_the_application_exactly(app_name: str, tmp_path: Path) -> None:
    with start_desktop("x11", tmp_path) as desktop:
        app = app_class(app_name)(desktop)
        app.start()
        model: ScriptedModel | None = None
        daemon: Daemon | None = None
        try:
            x, y, _w, _h = app.field
            click = {"type": "click", "button": "left", "x": x + 8, "y": y + 10}
            model = ScriptedModel(scenario({"actions": [click]}, {"message": "done"}))
            daemon = Daemon(desktop.display, model.start(), approval="actions").start()
            task_id = daemon.call("submit", prompt="click into the text")["id"]
            approval = daemon.wait_approval(task_id)
            daemon.call("pause", id=task_id)
            daemon.call("approve", id=approval["id"])
            daemon.wait_state(task_id, "paused")
            done = cuctl(daemon.socket, "act", str(task_id), json.dumps({"type": "type", "text": MIXED}))
            assert done.returncode == 0, done.stderr
            wait_until(lambda: app.value() == MIXED, 15, f"{app_name} to hold {MIXED!r} (holds {app.value()!r})")
            assert cuctl(daemon.socket, "resume", str(task_id)).returncode == 0
            task = daemon.wait_state(task_id, "succeeded", "failed")
            assert task["state"] == "succeeded", task["error"]
            humans = [e["data"]["action"] for e in daemon.events(task_id) if e["kind"] == "human_action"]
            assert humans == [{"type": "type", "text": MIXED}] and app.value() == MIXED
        finally:
            if daemon is not None:
                daemon.cleanup()
            if model is not None:
                model.stop()
            app.stop()
