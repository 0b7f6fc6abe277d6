"""Approval binding beside the blinking carets of real toolkits: a GTK text view and a Chromium textarea.

Under ``approval = "actions"`` the scripted model clicks into the empty text input,
where the caret blinks inside the compared square, 20 times; each click is
approved at a random moment. None may be refused (the Tk entry's caret, and the
targets that must be refused, are in test_daemon_binding.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.app_daemon import daemon_on_app
from tests.support.apps.base import App
from tests.support.daemon import APPROVALS, approve_each, scenario


def _clicks(app: App) -> dict[str, Any]:
    x, y, _w, _h = app.field
    # The empty input's caret sits at its top left: inside the square around the click.
    click = {"type": "click", "button": "left", "x": x + 8, "y": y + 10}
    return scenario(*[{"actions": [click]}] * APPROVALS, {"message": "done"})


@pytest.mark.parametrize("app_name", ["gtk", "chromium"])
def test_approved_clicks_next_to_a_blinking_caret_are_never_refused(app_name: str, tmp_path: Path) -> None:
    with daemon_on_app(app_name, tmp_path, _clicks, approval="actions") as (_app, daemon):
        # The same click on an unchanged screen, 20 times, is the point here: the stuck guard is off.
        task_id = daemon.call("submit", prompt="click into the text, many times", repeat_limit=0, cycle_limit=0)["id"]
        approve_each(daemon, task_id, APPROVALS, seed=sum(map(ord, app_name)))
        task = daemon.wait_state(task_id, "succeeded", "failed")
        assert task["state"] == "succeeded", task["error"]
