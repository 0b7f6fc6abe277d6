"""The blind first action (#30 §3): a model whose first output is an action, not a screenshot.

A rule asks about clicks on "delete*". The scripted model's first output is the click on
"Delete account", before it has seen the screen, as the task starts (its accessibility
connection still being made). The approval must come with a screenshot taken for the
approver and name the element (role, name, window), and once approved the click must run
(it used to fail: "the approved action has no screenshot to compare with"). On a GTK dialog
and on Chromium, on one desktop with its accessibility bus shared by the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cud.scripted import ScriptedModel
from tests.support.a11y import A11yBus, ChromiumForm, FormApp, a11y_desktop
from tests.support.daemon import Daemon, scenario
from tests.support.desktop import Desktop
from tests.support.recorder import wait_until

ASK_DELETE = """
[[policy.rules]]
action = "click"
name = "delete*"
decision = "ask"
"""


@pytest.fixture(scope="module")
def desk() -> Iterator[tuple[Desktop, A11yBus]]:
    with a11y_desktop("cud-blind-") as made:
        yield made


@pytest.fixture(params=["gtk", "chromium"])
def form(request: pytest.FixtureRequest, desk: tuple[Desktop, A11yBus]) -> Iterator[Any]:
    desktop, bus = desk
    app: Any = FormApp(desktop, bus, "gtk") if request.param == "gtk" else ChromiumForm(desktop, bus)
    app.start()
    try:
        yield app
    finally:
        app.stop()


def _delete_button(app: Any) -> tuple[int, int]:
    return app.button("Delete account") if isinstance(app, FormApp) else app.centre("delete")


def test_a_first_action_that_needs_approval_gets_a_screenshot_names_its_element_and_runs(
        desk: tuple[Desktop, A11yBus], form: Any) -> None:
    desktop, bus = desk
    x, y = _delete_button(form)
    first = {"type": "click", "button": "left", "x": x, "y": y}
    model = ScriptedModel(scenario({"actions": [first]}, {"message": "done"}, look_first=False))
    # A roomy lookup time, as in test_targets_daemon: this checks what is found, not how fast.
    daemon = Daemon(desktop.display, model.start(), config=f'session_bus = "{bus.address}"\ntarget_timeout = 5\n'
                    + ASK_DELETE)
    try:
        daemon.start()
        since = form.mark()
        task_id = daemon.call("submit", prompt="delete the account")["id"]
        approval = daemon.wait_approval(task_id)
        assert approval["kind"] == "action" and approval["actions"] == [first]
        # A screenshot was taken for the approver, in the task's record.
        assert approval["screenshot"] is not None and approval["screenshot"].endswith("-approval.png"), approval
        assert (daemon.state_dir / "trajectories" / str(task_id) / approval["screenshot"]).is_file()
        (target,) = approval["targets"]
        element, window = target["element"], target["window"]
        assert element is not None, target["note"]
        assert (element["role"], element["name"]) == ("push button", "Delete account"), target
        assert window is not None and window["pid"] == form.pid, target
        assert window["title"].startswith("Account settings"), window
        daemon.call("approve", id=approval["id"])
        task = daemon.wait_state(task_id, "succeeded", "failed")
        assert task["state"] == "succeeded", task["error"]
        got = wait_until(lambda: next((e for e in form.received(since) if e["type"] == "clicked"), None), 10,
                         "the approved click to reach the form")
        assert got["widget"] == "Delete account"
    finally:
        daemon.cleanup()
        model.stop()
