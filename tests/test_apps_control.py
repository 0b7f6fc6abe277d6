"""Take over on real applications: a person's typing while a task is paused reaches GTK, Chromium and xterm exactly.

The model clicks into the application's text input (an approval holds it there);
the task is paused at that batch's boundary, a person types mixed text with
``cuctl act`` through the daemon, and the task resumes. What the application
holds is read from the application itself (its probe), not from our own window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.app_daemon import daemon_on_app
from tests.support.apps.base import App
from tests.support.daemon import cuctl, scenario
from tests.support.recorder import wait_until

MIXED = "Grüße, 12 €! ½"


def _click_into_the_text(app: App) -> dict[str, Any]:
    x, y, _w, _h = app.field
    return scenario({"actions": [{"type": "click", "button": "left", "x": x + 8, "y": y + 10}]}, {"message": "done"})


@pytest.mark.parametrize("app_name", ["gtk", "chromium", "xterm"])
def test_a_persons_typing_while_paused_reaches_the_application_exactly(app_name: str, tmp_path: Path) -> None:
    with daemon_on_app(app_name, tmp_path, _click_into_the_text, approval="actions") as (app, daemon):
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
