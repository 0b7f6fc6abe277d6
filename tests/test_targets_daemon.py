"""Targets through the real daemon: records, approvals, rules and the identity binding, on a GTK dialog
(and a Qt one for the records and a deny rule).

A desktop with openbox, a session bus and at-spi-bus-launcher (all started and
stopped by pid) is shared by the module; each test starts its own dialog and its
own daemon, whose scripted model clicks and types at the dialog's widgets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.scripted import ScriptedModel
from tests.support.a11y import A11yBus, FormApp, a11y_desktop, start_a11y_bus
from tests.support.browser import Browser
from tests.support.console import Console
from tests.support.daemon import Daemon, cuctl, scenario
from tests.support.desktop import Desktop, start_desktop

RULES = {
    "deny_payments": """
[[policy.rules]]
id = "no payments"
action = ["click", "double_click"]
role = "push button"
name = ["re:delete|pay|send|transfer"]
decision = "deny"
""",
    "ask_delete": """
[[policy.rules]]
action = "click"
name = "delete*"
decision = "ask"
""",
}


@pytest.fixture(scope="module")
def desk() -> Iterator[tuple[Desktop, A11yBus]]:
    with a11y_desktop("cud-targets-daemon-") as made:
        yield made


@pytest.fixture
def dialog(request: pytest.FixtureRequest, desk: tuple[Desktop, A11yBus]) -> Iterator[FormApp]:
    """The GTK dialog, or the toolkit a test names (``indirect`` parametrization)."""
    desktop, bus = desk
    app = FormApp(desktop, bus, getattr(request, "param", "gtk"))
    app.start()
    try:
        yield app
    finally:
        app.stop()


class Run:
    def __init__(self, desk: tuple[Desktop, A11yBus], steps: list[dict[str, Any]], config: str = "",
                 approval: str | None = None) -> None:
        desktop, bus = desk
        self.model = ScriptedModel(scenario(*steps, {"message": "done"}))
        # A roomy lookup time: these tests check what is found, not how fast (the bench does).
        config = f'session_bus = "{bus.address}"\ntarget_timeout = 5\n' + config
        self.daemon = Daemon(desktop.display, self.model.start(), config=config, approval=approval)

    def __enter__(self) -> Daemon:
        try:
            return self.daemon.start()
        except BaseException:
            self.__exit__()
            raise

    def __exit__(self, *_: Any) -> None:
        self.daemon.cleanup()
        self.model.stop()


def click(point: tuple[int, int]) -> dict[str, Any]:
    return {"type": "click", "button": "left", "x": point[0], "y": point[1]}


def nothing_received(app: FormApp, since: int) -> None:
    assert [e for e in app.fence(since) if e["type"] in ("clicked", "text")] == []


@pytest.mark.parametrize("dialog", ["gtk", "qt"], indirect=True)
def test_actions_record_their_targets_and_approvals_name_them(desk: Any, dialog: FormApp) -> None:
    entry = dialog.entry()
    steps = [{"actions": [click(dialog.button("Cancel"))]}, {"actions": [click(entry)]},
             {"actions": [{"type": "type", "text": "hi"}]}]
    since = dialog.mark()
    with Run(desk, steps, approval="actions") as daemon:
        task_id = daemon.call("submit", prompt="press cancel, then type")["id"]
        first = daemon.wait_approval(task_id)
        (target,) = first["targets"]
        assert target["element"] is not None, target["note"]
        assert (target["element"]["role"], target["element"]["name"]) == ("push button", "Cancel"), target
        assert target["window"]["pid"] == dialog.pid
        listed = cuctl(daemon.socket, "approvals")
        assert (f'click "Cancel" (push button) in "Account settings" (python3, pid {dialog.pid}) at '
                in listed.stdout), listed.stdout
        daemon.call("approve", id=first["id"])
        for _ in range(2):
            daemon.call("approve", id=daemon.wait_approval(task_id)["id"])
        task = daemon.wait_state(task_id, "succeeded", "failed")
        assert task["state"] == "succeeded", task["error"]
        actions = [e["data"] for e in daemon.events(task_id) if e["kind"] == "action"]
        out = daemon.dir / "export"
        exported = cuctl(daemon.socket, "export", str(task_id), "-o", str(out))
        assert exported.returncode == 0, exported.stderr
        lines = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [a["target"]["element"]["name"] for a in actions] == ["Cancel", "Search", "Search"]
    assert actions[2]["target"]["kind"] == "focus" and "focused" in actions[2]["target"]["element"]["states"]
    received = dialog.received(since)
    assert received[0] == {"type": "clicked", "widget": "Cancel"}
    assert received[-1] == {"type": "text", "widget": "Search", "value": "hi"}
    assert [e["data"]["target"] for e in lines if e["kind"] == "action"] == [a["target"] for a in actions]


def test_the_console_names_the_element_an_approval_is_for(desk: Any, dialog: FormApp, short_tmp: Path) -> None:
    with Run(desk, [{"actions": [click(dialog.button("Delete account"))]}], RULES["ask_delete"]) as daemon:
        task_id = daemon.call("submit", prompt="delete")["id"]
        approval = daemon.wait_approval(task_id)
        console = Console(daemon.socket, short_tmp)
        browser = Browser(short_tmp)
        try:
            watched = browser.open(console.url, width=1400, height=1000)
            card = watched.page.locator(f'article.approval[data-id="{approval["id"]}"]')
            card.wait_for()
            text = card.inner_text()
        finally:
            browser.close()
            assert console.stop() == 0, console.log_text()
        daemon.call("deny", id=approval["id"])
    assert (f'click "Delete account" (push button) in "Account settings" (python3, pid {dialog.pid}) at '
            in text), text


@pytest.mark.parametrize("dialog", ["gtk", "qt"], indirect=True)
def test_a_deny_rule_stops_the_click_and_fails_the_task_naming_it(desk: Any, dialog: FormApp) -> None:
    since = dialog.mark()
    with Run(desk, [{"actions": [click(dialog.button("Delete account"))]}], RULES["deny_payments"]) as daemon:
        task_id = daemon.call("submit", prompt="delete it")["id"]
        task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "failed" and task["error"]["kind"] == "policy_denied", task
    assert "policy.rules[0] ('no payments')" in task["error"]["message"]
    assert '"Delete account" (push button)' in task["error"]["message"]
    nothing_received(dialog, since)


def test_an_ask_rule_raises_an_approval_naming_the_element(desk: Any, dialog: FormApp) -> None:
    steps = [{"actions": [click(dialog.button("Cancel"))]}, {"actions": [click(dialog.button("Delete account"))]}]
    since = dialog.mark()
    with Run(desk, steps, RULES["ask_delete"]) as daemon:  # approval mode "safety": only the rule asks
        task_id = daemon.call("submit", prompt="cancel, then delete")["id"]
        approval = daemon.wait_approval(task_id)
        assert approval["targets"][0]["element"]["name"] == "Delete account"
        assert [c["message"] for c in approval["checks"]] == ["rule policy.rules[0] asks"]
        listed = cuctl(daemon.socket, "approvals").stdout
        assert 'rule policy.rules[0] asks: click "Delete account" (push button) in "Account settings"' in listed
        assert dialog.received(since) == [{"type": "clicked", "widget": "Cancel"}]  # not asked about
        daemon.call("deny", id=approval["id"], reason="not today")
        task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["error"]["kind"] == "approval"
    nothing_received(dialog, since + 1)


def test_a_relabelled_button_after_approval_is_refused_by_identity(desk: Any, dialog: FormApp) -> None:
    since = dialog.mark()
    with Run(desk, [{"actions": [click(dialog.button("Delete account"))]}], RULES["ask_delete"]) as daemon:
        task_id = daemon.call("submit", prompt="delete")["id"]
        approval = daemon.wait_approval(task_id)
        dialog.command("relabel")
        daemon.call("approve", id=approval["id"])
        task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "failed" and task["error"]["kind"] == "approval", task
    message = task["error"]["message"]
    assert 'approved "Delete account" (push button)' in message and 'now "Send money" (push button)' in message
    nothing_received(dialog, since)


def test_a_submitters_rules_are_stricter_only(desk: Any, dialog: FormApp) -> None:
    since = dialog.mark()
    with Run(desk, [{"actions": [click(dialog.button("Cancel"))]}]) as daemon:
        loose = cuctl(daemon.socket, "submit", "--rule", '{"name": "Cancel", "decision": "allow"}', "x")
        assert loose.returncode != 0 and "'submit' field 'rules[0].decision' is 'allow'" in loose.stderr
        task_id = daemon.call("submit", prompt="cancel", rules=[{"name": "cancel", "decision": "deny"}])["id"]
        task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["error"]["kind"] == "policy_denied" and "rules[0]" in task["error"]["message"], task
    nothing_received(dialog, since)


def _walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node["children"]:
        yield from _walk(child)


def test_inspect_and_tree_by_hand(desk: Any, dialog: FormApp) -> None:
    x, y = dialog.button("Delete account")
    with Run(desk, []) as daemon:
        looked = cuctl(daemon.socket, "inspect", str(x), str(y), "--json")
        assert looked.returncode == 0, looked.stderr
        result = json.loads(looked.stdout)
        said = cuctl(daemon.socket, "inspect", str(x), str(y))
        full = json.loads(cuctl(daemon.socket, "tree", "--app", "gtk_form.py", "--json").stdout)
        shallow = json.loads(cuctl(daemon.socket, "tree", "--depth", "1", "--json").stdout)
        printed = cuctl(daemon.socket, "tree", "--app", "gtk_form.py")
        bad = cuctl(daemon.socket, "tree", "--count", "0")
        nobody = cuctl(daemon.socket, "tree", "--app", "nope")
        off = cuctl(daemon.socket, "inspect", "2000", "5")
    assert result["target"]["element"]["name"] == "Delete account"
    chain = result["chain"]
    assert chain[0]["role"] == "frame" and chain[0]["name"] == "Account settings"
    assert chain[-1]["role"] == "push button" and chain[-1]["name"] == "Delete account"
    bx, by, bw, bh = chain[-1]["bounds"]
    assert bx <= x < bx + bw and by <= y < by + bh
    assert said.stdout.splitlines()[0] == (f'({x}, {y}) on seat default: "Delete account" (push button) in '
                                           f'"Account settings" (python3, pid {dialog.pid})')
    (app,) = full["apps"]
    assert app["application"] == "gtk_form.py" and app["pid"] == dialog.pid and not full["truncated"]
    nodes = [n for window in app["windows"] for n in _walk(window)]
    buttons = {n["name"]: n["bounds"] for n in nodes if n["role"] == "push button"}
    assert set(buttons) == {"Delete account", "Cancel"}
    assert buttons["Cancel"][:2] == dialog._state()["buttons"]["Cancel"][:2]
    assert shallow["truncated"] and all(not w["children"] for a in shallow["apps"] for w in a["windows"])
    lines = printed.stdout.splitlines()
    assert lines[0] == f"gtk_form.py (pid {dialog.pid})"
    assert any(line.strip().startswith('- push button "Cancel" at ') for line in lines), lines
    assert bad.returncode != 0 and "'count' must be an integer from 1 to 5000, got 0" in bad.stderr
    # No application of that name: said, with the names there are, and exit 2 (docs/cuctl.md).
    assert nobody.returncode == 2 and nobody.stdout == ""
    assert nobody.stderr.startswith("cuctl: no application named 'nope' on the accessibility bus; it has ")
    assert "'gtk_form.py'" in nobody.stderr, nobody.stderr
    # A point off the 1280x800 screen, by the drivers' one bounds check.
    assert off.returncode == 2 and off.stdout == ""
    assert off.stderr.strip() == "cuctl: point (2000, 5) is outside the 1280x800 screen", off.stderr
    # The label GTK never shows has no place on the screen, not AT-SPI's (G_MININT, G_MININT) "no extents".
    (unshown,) = [n for n in nodes if n["name"] == "Never shown"]
    assert unshown["role"] == "label" and unshown["bounds"] is None
    assert all(n["bounds"] is None or min(n["bounds"]) >= 0 for n in nodes), nodes
    assert any(line.strip().startswith('- label "Never shown" [') for line in lines), lines  # no " at ..."


def test_a_vnc_seat_names_elements_only_with_the_display_and_bus_it_mirrors(tmp_path: Path) -> None:
    """TigerVNC's Xvnc is the X server: a seat naming its display and bus finds elements; one that does not says why."""
    with start_desktop("xvnc", tmp_path) as desktop:
        bus = start_a11y_bus(desktop)
        app = FormApp(desktop, bus, "gtk")
        try:
            app.start()
            password = tmp_path / "vnc.pass"
            password.write_text("s3cret\n")  # tests.support.vnc's default, which the desktop's server was given
            server = desktop.driver.server  # type: ignore[union-attr]
            seat = f'[[seats]]\nname = "vm"\nvnc = "{server}"\nvnc_password_file = "{password}"\n'
            mirrors = f'x_display = "{desktop.display}"\nsession_bus = "{bus.address}"\n'
            targets = {}
            # One daemon at a time: a daemon drives a server from one seat only.
            for name, config in (("mirror", seat + mirrors), ("blind", seat)):
                model = ScriptedModel(scenario({"actions": [click(app.button("Cancel"))]}, {"message": "done"}))
                daemon = Daemon(desktop.display, model.start(), config="target_timeout = 5\n" + config, seats={})
                try:
                    daemon.start()
                    task_id = daemon.call("submit", prompt="press cancel")["id"]
                    task = daemon.wait_state(task_id, "succeeded", "failed")
                    assert task["state"] == "succeeded", task["error"]
                    (action,) = [e["data"] for e in daemon.events(task_id) if e["kind"] == "action"]
                    targets[name] = action["target"]
                finally:
                    daemon.cleanup()
                    model.stop()
        finally:
            app.stop()
            bus.stop()
    mirror, blind = targets["mirror"], targets["blind"]
    assert mirror["window"]["pid"] == app.pid and mirror["window"]["title"] == "Account settings", mirror
    assert (mirror["element"]["role"], mirror["element"]["name"]) == ("push button", "Cancel"), mirror
    assert blind["window"] is None and blind["element"] is None, blind
    assert "unknown (VNC)" in blind["note"], blind
