"""Approvals: approve, deny, timeout, the ``actions`` approval mode, and binding to the screen shown."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.recorder import Recorder, wait_until
from tests.support.xserver import stop_process

CHECK = {"code": "confirm", "message": "The model wants to type. Approve?"}
TYPE_STEP = {"safety_checks": [CHECK], "actions": [{"type": "type", "text": "ok ✓"}]}
CLICK_STEP = {"safety_checks": [CHECK], "actions": [{"type": "click", "button": "left", "x": 300, "y": 300}]}


def test_approve_runs_the_action_and_records_the_approver(start_daemon, recorder: Recorder) -> None:
    daemon: Daemon = start_daemon(scenario(TYPE_STEP, {"message": "typed"}))
    task_id = daemon.call("submit", prompt="type ok")["id"]
    pending = json_out(cuctl(daemon.socket, "approvals", "--json"))
    if not pending:
        daemon.wait_approval(task_id)
        pending = json_out(cuctl(daemon.socket, "approvals", "--json"))
    approval = pending[0]
    assert approval["task_id"] == task_id and approval["kind"] == "safety"
    assert approval["checks"][0]["message"] == CHECK["message"]
    assert approval["actions"] == [{"type": "type", "text": "ok ✓"}]
    assert approval["screenshot"] == "step-0001.png" and approval["created_at"]
    assert daemon.task(task_id)["state"] == "awaiting_approval"
    assert recorder.text() == ""  # nothing ran before the approval

    result = cuctl(daemon.socket, "approve", str(approval["id"]))
    assert result.returncode == 0, result.stderr
    assert daemon.wait_state(task_id, "succeeded")["final_message"] == "typed"
    recorder.wait_text("ok ✓")
    decided = [e["data"] for e in daemon.events(task_id) if e["kind"] == "approval_decided"]
    assert decided == [{"approval_id": approval["id"], "outcome": "approved", "by": {"uid": 0, "name": "root"},
                        "reason": None}]
    # The model got the checks acknowledged.
    outputs = [i for i in daemon.model.requests[-1]["input"] if i.get("type") == "computer_call_output"]
    assert outputs[-1]["acknowledged_safety_checks"][0]["code"] == "confirm"
    again = cuctl(daemon.socket, "approve", str(approval["id"]))
    assert again.returncode == 2 and "no longer pending (it is approved)" in again.stderr


def test_deny_fails_the_task_and_the_action_never_runs(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(TYPE_STEP, {"message": "typed"}))
    task_id = daemon.call("submit", prompt="type ok")["id"]
    approval = daemon.wait_approval(task_id)
    assert cuctl(daemon.socket, "deny", str(approval["id"]), "--reason", "not today").returncode == 0
    task = daemon.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "approval"
    assert f"approval {approval['id']} was denied by root (uid 0): not today" == task["error"]["message"]
    assert not any(e["type"] == "KeyPress" for e in recorder.fenced()) and recorder.text() == ""


def test_an_unanswered_approval_times_out(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(TYPE_STEP, {"message": "typed"}), approval_timeout=0.5)
    task_id = daemon.call("submit", prompt="type ok")["id"]
    task = daemon.wait_state(task_id, "failed")
    assert ("timed out after 0.5 s with no decision (the daemon's config key 'approval_timeout')"
            in task["error"]["message"])
    assert daemon.call("approvals") == []
    assert not any(e["type"] == "KeyPress" for e in recorder.fenced()) and recorder.text() == ""


def test_cancel_while_awaiting_approval(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(TYPE_STEP, {"message": "typed"}))
    task_id = daemon.call("submit", prompt="type ok")["id"]
    approval = daemon.wait_approval(task_id)
    daemon.call("cancel", id=task_id)
    assert daemon.wait_state(task_id, "cancelled")["reason"] == "cancelled by root (uid 0)"
    late = cuctl(daemon.socket, "approve", str(approval["id"]))
    assert late.returncode == 2 and "it is cancelled" in late.stderr
    assert not any(e["type"] == "KeyPress" for e in recorder.fenced()) and recorder.text() == ""


def test_policy_actions_asks_before_every_effectful_action(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(
        {"actions": [{"type": "wait"}, {"type": "click", "button": "left", "x": 100, "y": 100},
                     {"type": "type", "text": "a"}]},
        {"message": "done"},
    ), approval="actions")
    # A submitter may not loosen the daemon's policy.
    looser = cuctl(daemon.socket, "submit", "x", "--approval", "safety")
    assert looser.returncode == 2
    assert "'safety' is looser than the daemon's 'actions' (its config key 'approval')" in looser.stderr
    task_id = daemon.call("submit", prompt="click and type")["id"]
    kinds = []
    for expected in ("click", "type"):
        approval = daemon.wait_approval(task_id)
        assert approval["kind"] == "action" and approval["actions"][0]["type"] == expected
        kinds.append(expected)
        daemon.call("approve", id=approval["id"])
        def consumed(approval_id: int = approval["id"]) -> bool:
            return all(a["id"] != approval_id for a in daemon.call("approvals"))

        wait_until(consumed, 10, "the approval to be consumed")
    daemon.wait_state(task_id, "succeeded")
    recorder.wait_text("a")


def test_a_submitter_may_make_the_policy_stricter(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "type", "text": "b"}]}, {"message": "done"}))
    task_id = json_out(cuctl(daemon.socket, "submit", "type b", "--approval", "actions", "--json"))["id"]
    approval = daemon.wait_approval(task_id)
    assert approval["kind"] == "action" and daemon.task(task_id)["approval"] == "actions"
    daemon.call("deny", id=approval["id"])
    daemon.wait_state(task_id, "failed")
    assert not any(e["type"] == "KeyPress" for e in recorder.fenced()) and recorder.text() == ""


def test_an_approved_click_is_refused_if_the_screen_changed_under_it(start_daemon, recorder: Recorder,
                                                                   xvfb) -> None:
    daemon = start_daemon(scenario(CLICK_STEP, {"message": "clicked"}))
    task_id = daemon.call("submit", prompt="click")["id"]
    approval = daemon.wait_approval(task_id)
    # Something else appears exactly where the approver saw the target.
    cover = subprocess.Popen(
        [sys.executable, "-c", "import tkinter as tk; r = tk.Tk(); r.overrideredirect(True); "
         "r.geometry('60x60+270+270'); r.configure(background='#ff0000'); "
         "r.after(50, lambda: print('up', flush=True)); r.mainloop()"],
        env={**os.environ, "DISPLAY": xvfb.display}, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert cover.stdout is not None and cover.stdout.readline().strip() == b"up"
        mark = recorder.mark()
        daemon.call("approve", id=approval["id"])
        task = daemon.wait_state(task_id, "failed")
    finally:
        stop_process(cover)
        if cover.stdout is not None:
            cover.stdout.close()
    assert task["error"]["kind"] == "approval"
    assert "the screen around (300, 300) changed since it was approved" in task["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] == "ButtonPress"] == []


def test_an_approved_click_runs_when_the_screen_is_unchanged(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(CLICK_STEP, {"message": "clicked"}))
    task_id = daemon.call("submit", prompt="click")["id"]
    mark = recorder.mark()
    daemon.call("approve", id=daemon.wait_approval(task_id)["id"])
    daemon.wait_state(task_id, "succeeded")
    recorder.wait_for(lambda e: e["type"] == "ButtonPress" and (e["x"], e["y"]) == (300, 300), since=mark)
