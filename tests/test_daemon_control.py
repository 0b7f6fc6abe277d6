"""Pause, take over, resume: a person stops a task at a boundary, types on its seat, and hands it back.

The model's typing needs an approval (policy ``actions``); the pause is asked for
while that approval waits, so it lands exactly at the boundary after the typed
batch, before its screenshot — no timing involved.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from cud.cuctl.client import RemoteError
from tests.support.daemon import Daemon, cuctl, json_out, scenario
from tests.support.recorder import Recorder

MIXED = "Grüße, 12 €! ½ — ok"
MODEL_TYPES = scenario({"actions": [{"type": "type", "text": "m"}]}, {"actions": [{"type": "wait"}]},
                       {"message": "done"})
#: The same, with a model that thinks for a minute after the pause: a cancel then always finds the task running.
MODEL_TYPES_THEN_THINKS = scenario({"actions": [{"type": "type", "text": "m"}]},
                                   {"actions": [{"type": "wait"}], "delay": 60}, {"message": "done"})

#: What the recorder reports of typing and clicking (a fence's own motion is not among them).
PRESSES = ("KeyPress", "ButtonPress", "MouseWheel")


def _paused(daemon: Daemon, recorder: Recorder) -> int:
    """A task paused after the model typed "m", before the screenshot of that batch."""
    task_id = daemon.call("submit", prompt="type m")["id"]
    approval = daemon.wait_approval(task_id)
    paused = daemon.call("pause", id=task_id)
    assert paused["state"] == "awaiting_approval"  # asked for; it lands at the boundary
    daemon.call("approve", id=approval["id"])
    daemon.wait_state(task_id, "paused")
    recorder.wait_text("m")
    return task_id


def test_a_person_pauses_types_exact_text_and_resumes_and_the_model_sees_it(start_daemon,
                                                                           recorder: Recorder) -> None:
    daemon = start_daemon(MODEL_TYPES, approval="actions")
    task_id = _paused(daemon, recorder)
    shots_before = sorted(p.name for p in (daemon.state_dir / "trajectories" / str(task_id)).iterdir())
    done = cuctl(daemon.socket, "act", str(task_id), json.dumps({"type": "type", "text": MIXED}))
    assert done.returncode == 0, done.stderr
    recorder.wait_text("m" + MIXED)
    keys = cuctl(daemon.socket, "act", str(task_id), '{"type": "keypress", "keys": ["ctrl", "a"]}')
    assert keys.returncode == 0, keys.stderr
    assert daemon.task(task_id)["state"] == "paused"
    # Nothing was screenshotted while paused: the batch's screenshot waits for the resume.
    assert sorted(p.name for p in (daemon.state_dir / "trajectories" / str(task_id)).iterdir()) == shots_before
    assert json_out(cuctl(daemon.socket, "resume", str(task_id), "--json"))["state"] == "running"
    assert daemon.wait_state(task_id, "succeeded")["final_message"] == "done"
    events = daemon.events(task_id)
    kinds = [e["kind"] for e in events]
    order = [k for k in kinds if k in ("pause_requested", "paused", "human_action", "resumed")]
    assert order == ["pause_requested", "paused", "human_action", "human_action", "resumed"]
    humans = [e["data"] for e in events if e["kind"] == "human_action"]
    assert humans[0]["action"] == {"type": "type", "text": MIXED}
    assert humans[0]["by"] == {"uid": os.getuid(), "name": pwd.getpwuid(os.getuid()).pw_name}
    # The screenshot that ends the paused batch was taken after the resume, so the model's next
    # request carries what the person did; the step records the human actions with their author.
    step = next(e["data"] for e in events if e["kind"] == "step" and any("by" in a for a in e["data"]["actions"]))
    assert [a["action"] for a in step["actions"] if "by" in a] == [h["action"] for h in humans]
    assert step["paused_ms"] > 0 and step["screenshot"] is not None
    assert step["screenshot"] not in shots_before  # none was taken while paused (checked above)
    # The report draws the person's actions apart from the model's.
    page = daemon.dir / "report.html"
    assert cuctl(daemon.socket, "report", str(task_id), "-o", str(page)).returncode == 0
    assert f"typed by {pwd.getpwuid(os.getuid()).pw_name}" in page.read_text()


def test_bad_control_requests_are_refused_and_change_nothing(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(MODEL_TYPES, approval="actions")
    queued_check = daemon.call("submit", prompt="type m")["id"]
    approval = daemon.wait_approval(queued_check)
    with pytest.raises(RemoteError, match=f"task {queued_check} is not paused; pause it before acting"):
        daemon.call("act", id=queued_check, action={"type": "type", "text": "x"})
    with pytest.raises(RemoteError, match=f"task {queued_check} is not paused"):
        daemon.call("resume", id=queued_check)
    with pytest.raises(RemoteError, match="no task with id 99"):
        daemon.call("pause", id=99)
    daemon.call("pause", id=queued_check)
    daemon.call("approve", id=approval["id"])
    daemon.wait_state(queued_check, "paused")
    recorder.wait_text("m")
    mark = recorder.mark()
    off = cuctl(daemon.socket, "act", str(queued_check), '{"type": "click", "x": 5000, "y": 1, "button": "left"}')
    assert off.returncode == 2 and "5000" in off.stderr
    unknown = cuctl(daemon.socket, "act", str(queued_check), '{"type": "keypress", "keys": ["hyperspace"]}')
    assert unknown.returncode == 2 and "hyperspace" in unknown.stderr
    not_json = cuctl(daemon.socket, "act", str(queued_check), "{type: click}")
    assert not_json.returncode == 2 and "ACTION-JSON is not valid JSON" in not_json.stderr
    shot = cuctl(daemon.socket, "act", str(queued_check), '{"type": "screenshot"}')
    assert shot.returncode == 2 and "'action' must be an action object" in shot.stderr
    # Fenced: a keystroke or click the daemon sent before its refusals would have reached the window by now.
    assert [e for e in recorder.fenced(mark) if e["type"] in PRESSES] == []
    assert recorder.text() == "m" and daemon.task(queued_check)["state"] == "paused"
    assert not [e for e in daemon.events_now(queued_check) if e["kind"] == "human_action"]
    # Cancelling a paused task ends it; its seat takes the next task.
    assert cuctl(daemon.socket, "cancel", str(queued_check)).returncode == 0
    assert daemon.wait_state(queued_check, "cancelled")["state"] == "cancelled"
    after = daemon.call("submit", prompt="next")["id"]
    daemon.wait_approval(after)


def test_only_an_approver_may_act_on_a_seat(start_daemon, recorder: Recorder, tmp_path: Path) -> None:
    daemon = start_daemon(MODEL_TYPES, approval="actions", config='[access]\nsubmit_users = ["nobody"]\n')
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    nobody = pwd.getpwnam("nobody")
    setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    task_id = json_out(cuctl(daemon.socket, "submit", "type m", "--json", prefix=setpriv))["id"]
    approval = daemon.wait_approval(task_id)
    # The submitter may pause their own task, but not act on the seat: that takes approve rights.
    assert cuctl(daemon.socket, "pause", str(task_id), prefix=setpriv).returncode == 0
    daemon.call("approve", id=approval["id"])
    daemon.wait_state(task_id, "paused")
    recorder.wait_text("m")
    mark = recorder.mark()
    refused = cuctl(daemon.socket, "act", str(task_id), '{"type": "type", "text": "x"}', prefix=setpriv)
    assert refused.returncode == 2 and "may not act on a task's seat" in refused.stderr
    assert [e for e in recorder.fenced(mark) if e["type"] in PRESSES] == [] and recorder.text() == "m"
    assert cuctl(daemon.socket, "resume", str(task_id), prefix=setpriv).returncode == 0
    paused_by = next(e["data"]["by"] for e in daemon.events_now(task_id) if e["kind"] == "paused")
    assert paused_by == {"uid": nobody.pw_uid, "name": "nobody"}


def test_an_approver_without_submit_rights_controls_anyones_task(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(MODEL_TYPES_THEN_THINKS, approval="actions",
                          config='[access]\napprove_users = ["nobody"]\n')
    os.chmod(daemon.dir, 0o711)  # the socket's fences, opened for this test's other user
    os.chmod(daemon.socket, 0o666)
    nobody = pwd.getpwnam("nobody")
    setpriv = ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]
    task_id = _paused(daemon, recorder)  # the daemon's own user's task
    for args in (["act", str(task_id), '{"type": "type", "text": "x"}'], ["resume", str(task_id)],
                 ["cancel", str(task_id)]):
        done = cuctl(daemon.socket, *args, prefix=setpriv)
        assert done.returncode == 0, (args, done.stderr)
    recorder.wait_text("mx")
    assert daemon.wait_state(task_id, "cancelled")["state"] == "cancelled"
    refused = cuctl(daemon.socket, "submit", "not mine to give", prefix=setpriv)
    assert refused.returncode == 2 and "may not submit" in refused.stderr
