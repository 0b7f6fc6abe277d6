"""[[notify]] hooks on the real daemon: a command that approves, webhooks in each format, slow and
failing receivers that never slow a task, and the seats' health."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemon import Daemon, scenario
from tests.support.receiver import Receiver
from tests.support.recorder import wait_until
from tests.support.xserver import XServer, restart_xvfb

# Model text with everything a shell or a chat would act on: it must arrive as plain data.
NASTY = "$(touch {canary}) `touch {canary}`; \"q\" 'q' <!channel> <http://x|y> & done"
CHECK = {"code": "confirm", "message": "Approve typing? " + NASTY}
TYPE_STEP = {"safety_checks": [CHECK], "actions": [{"type": "type", "text": "ok ✓"}]}
MOVES = [{"actions": [{"type": "move", "x": 100 + 10 * n, "y": 200}]} for n in range(6)]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver({"/plain": "ok", "/ntfy": "ok", "/slack": "ok", "/silent": "hang", "/slow": "hang",
                     "/command": "hang", "/hang-short": "hang", "/fail": "fail"}).start()
    yield made
    made.stop()


def nasty(tmp: Path) -> tuple[str, Path]:
    canary = tmp / "canary"
    return NASTY.format(canary=canary), canary


def metric(daemon: Daemon, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(daemon.call("metrics")):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no sample {name} {labels}")


def write_script(path: Path, body: str, interpreter: str = sys.executable) -> Path:
    path.write_text(f"#!{interpreter}\n{body}")
    path.chmod(0o755)
    return path


APPROVING_HOOK = """
import json, os, shlex, subprocess, sys
from pathlib import Path
event = json.load(sys.stdin)
out = Path(sys.argv[1])
env = {k: v for k, v in os.environ.items() if k.startswith("CUD_")}
record = {"event": event, "env": env, "argv": sys.argv[2:], "api_key": os.environ.get("OPENAI_API_KEY")}
tmp = out / f".{os.getpid()}.tmp"  # renamed whole: the test may look at any moment
tmp.write_text(json.dumps(record))
os.replace(tmp, out / f"{event['event']}-{os.getpid()}.json")
if event["event"] == "approval_requested":
    # The line as given, split as a shell would, run without one; cuctl from this interpreter's bin.
    argv = shlex.split(event["approve"])
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    done = subprocess.run(argv, env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=60)
    (out / ".approved.tmp").write_text(f"{done.returncode}\\n{done.stdout}{done.stderr}")
    os.replace(out / ".approved.tmp", out / "approved.txt")
"""


def test_a_command_hook_gets_the_approval_and_grants_it_with_the_line_it_was_given(start_daemon, short_tmp) -> None:
    text, canary = nasty(short_tmp)
    out = short_tmp / "out"
    out.mkdir()
    hook = write_script(short_tmp / "hook.py", APPROVING_HOOK)
    literal = f"$(touch {canary})"
    config = f"""
[[notify]]
name = "approver"
events = ["approval_requested", "task_finished"]
command = [{json.dumps(str(hook))}, {json.dumps(str(out))}, {json.dumps(literal)}]
timeout = 60
"""
    check = {"code": "confirm", "message": "Approve typing? " + text}
    daemon: Daemon = start_daemon(scenario({**TYPE_STEP, "safety_checks": [check]}, {"message": "typed " + text}),
                                  config=config)
    prompt = "type ok " + text + " " + "x" * 400
    task_id = daemon.call("submit", prompt=prompt)["id"]
    task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "succeeded", task
    # The hook writes down what cuctl said after it said it: maybe just after the task ended.
    approved = wait_until(lambda: (out / "approved.txt").exists(), 30, "the hook's cuctl") and \
        (out / "approved.txt").read_text()
    assert approved.startswith("0\n") and f"approved (task {task_id})" in approved, approved
    decided = [e["data"] for e in daemon.events(task_id) if e["kind"] == "approval_decided"]
    assert [d["outcome"] for d in decided] == ["approved"] and decided[0]["by"] is not None

    finished = wait_until(lambda: list(out.glob("task_finished-*.json")), 30, "the task_finished hook")
    [asked] = [json.loads(p.read_text()) for p in out.glob("approval_requested-*.json")]
    [ended] = [json.loads(p.read_text()) for p in finished]
    event, approval = asked["event"], asked["event"]["approval"]
    assert event["task"]["id"] == task_id and event["task"]["seat"] == "default"
    assert event["task"]["prompt"] == prompt[:299] + "…" and event["task"]["prompt_truncated"] is True
    assert approval["id"] == decided[0]["approval_id"] and approval["kind"] == "safety"
    assert approval["message"] == check["message"] and approval["checks"][0]["message"] == check["message"]
    assert approval["actions"] == [{"type": "type", "text": "ok ✓"}]
    assert approval["action_words"] == ["type 'ok ✓'"]
    assert approval["screenshot"] == str(daemon.state_dir / "trajectories" / str(task_id) / "step-0001.png")
    assert Path(approval["screenshot"]).is_file()
    assert event["approve"] == f"cuctl --socket {daemon.socket} approve {approval['id']}"
    assert event["deny"] == f"cuctl --socket {daemon.socket} deny {approval['id']}"
    # From another machine (a fleet's head): the same line through ssh to this host, by the name events carry.
    host = socket.gethostname()
    assert event["host"] == host
    assert event["approve_remote"] == f"cuctl --host ssh://{host} --socket {daemon.socket} approve {approval['id']}"
    assert event["deny_remote"] == f"cuctl --host ssh://{host} --socket {daemon.socket} deny {approval['id']}"
    assert asked["env"] == {"CUD_EVENT": "approval_requested", "CUD_HOSTNAME": host, "CUD_TASK_ID": str(task_id),
                            "CUD_SEAT": "default", "CUD_STATE": "awaiting_approval",
                            "CUD_APPROVAL_ID": str(approval["id"]), "CUD_APPROVE": event["approve"],
                            "CUD_DENY": event["deny"], "CUD_APPROVE_REMOTE": event["approve_remote"],
                            "CUD_DENY_REMOTE": event["deny_remote"], "CUD_SCREENSHOT": approval["screenshot"]}
    assert ended["event"]["task"]["state"] == "succeeded" and ended["env"]["CUD_STATE"] == "succeeded"
    assert ended["event"]["task"]["final_message"] == "typed " + text
    # The argument went as written, the daemon's API key did not go at all, and nothing ran the model's text.
    assert asked["argv"] == [literal] and asked["api_key"] is None
    assert not canary.exists()
    assert metric(daemon, "cud_notify_delivered_total", hook="approver", event="approval_requested") == 1


def test_webhooks_get_the_event_as_json_as_ntfy_and_as_slack(start_daemon, receiver: Receiver, short_tmp) -> None:
    text, _canary = nasty(short_tmp)
    token = short_tmp / "token"
    token.write_text("Bearer tk-secret-0123\n")
    config = f"""
[[notify]]
name = "plain"
webhook = "{receiver.url('/plain')}"
secret_header = "X-Cud-Token"
secret_file = "{token}"
[[notify]]
name = "phone"
webhook = "{receiver.url('/ntfy/cud-topic')}"
format = "ntfy"
events = ["approval_requested", "task_finished"]
secret_header = "Authorization"
secret_file = "{token}"
[[notify]]
name = "chat"
webhook = "{receiver.url('/slack')}"
format = "slack"
events = ["approval_requested", "task_finished"]
"""
    check = {"code": "confirm", "message": "Approve? " + text}
    daemon: Daemon = start_daemon(scenario({**TYPE_STEP, "safety_checks": [check]}, {"message": "done"}), config=config)
    task_id = daemon.call("submit", prompt="type ok")["id"]
    approval = daemon.wait_approval(task_id)
    for path in ("/plain", "/ntfy", "/slack"):  # so each receiver's hits come in the events' order
        wait_until(lambda p=path: receiver.on(p), 30, path)
    daemon.call("approve", id=approval["id"])
    assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"
    for path in ("/plain", "/ntfy", "/slack"):
        wait_until(lambda p=path: len(receiver.on(p)) >= 2, 30, path)

    plain = receiver.on("/plain")
    assert [hit.body["event"] for hit in plain] == ["approval_requested", "task_finished"]
    asked = plain[0].body
    assert asked["approval"]["id"] == approval["id"] and asked["approval"]["message"] == check["message"]
    assert asked["task"]["id"] == task_id and asked["approve"].endswith(f"approve {approval['id']}")
    assert plain[1].body["task"]["state"] == "succeeded" and plain[1].body["task"]["final_message"] == "done"
    assert all(hit.headers["X-Cud-Token"] == "Bearer tk-secret-0123" for hit in plain)
    assert all(hit.headers["Content-Type"] == "application/json" for hit in plain)

    # ntfy: JSON publishing to the server's root, the topic inside (the hits' path is the root).
    ntfy = receiver.on("/ntfy")
    assert len(ntfy) == 2 and all(hit.body["topic"] == "cud-topic" for hit in ntfy)
    assert ntfy[0].body["title"] == f"cud: task {task_id} on seat default needs approval {approval['id']}"
    assert check["message"] in ntfy[0].body["message"] and asked["approve"] in ntfy[0].body["message"]
    assert f"From elsewhere: {asked['approve_remote']}" in ntfy[0].body["message"]
    assert f"On {asked['host']}: {asked['approve']}" in ntfy[0].body["message"]
    assert ntfy[0].body["priority"] == 4
    assert ntfy[1].body["title"].startswith(f"cud: task {task_id} on seat default succeeded after ")
    assert all(hit.headers["Authorization"] == "Bearer tk-secret-0123" for hit in ntfy)

    slack = receiver.on("/slack")
    assert len(slack) == 2 and set(slack[0].body) == {"text"}
    said = slack[0].body["text"]
    assert "&lt;!channel&gt;" in said and "<!channel>" not in said and "&amp; done" in said
    assert asked["approve"] in said and "Authorization" not in slack[0].headers
    # The secret is in no config, log or record.
    assert "tk-secret" not in (daemon.dir / "cud.toml").read_text() and "tk-secret" not in daemon.log_text()


#: A hook command that hangs, observably: it hands its event to the test's receiver, which holds it.
HOLDING = """
import sys, urllib.request
request = urllib.request.Request(sys.argv[1], data=sys.stdin.buffer.read(),
                                 headers={"Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=600).read()
"""
#: A hook command that hangs until killed; it says it started (its pid, which exec keeps). A shell
#: and sleep, started in a few milliseconds however loaded the machine, not a Python.
SHELL_SLEEPER = """: > "$1/$$"
exec sleep 600
"""
#: The receivers that hold their notification until the test lets go: never before the task has ended.
HELD = ("/silent", "/slow", "/command")


def test_receivers_that_hold_their_notification_never_slow_the_task(start_daemon, receiver: Receiver,
                                                                     short_tmp) -> None:
    command = write_script(short_tmp / "holding.py", HOLDING)
    config = f"""
[[notify]]
name = "silent"  # a webhook that never answers
events = ["approval_requested"]
webhook = "{receiver.url('/silent')}"
timeout = 300
retries = 0
[[notify]]
name = "slow"  # a webhook that answers, but only after the task has ended
events = ["approval_requested", "task_finished"]
webhook = "{receiver.url('/slow')}"
timeout = 300
concurrency = 1
[[notify]]
name = "hanging"  # a command that hangs until then
events = ["approval_requested"]
command = ["{command}", "{receiver.url('/command')}"]
timeout = 300
"""
    daemon: Daemon = start_daemon(scenario(TYPE_STEP, *MOVES, {"message": "moved"}), config=config)
    task_id = daemon.call("submit", prompt="type, then move")["id"]
    approval = daemon.wait_approval(task_id)
    # Every receiver holds the approval's notification before the task goes on...
    wait_until(lambda: all(receiver.hanging.get(path) == 1 for path in HELD), 30, f"{HELD} to hold on")
    daemon.call("approve", id=approval["id"])
    # ...and the task takes all its steps and ends while they still hold it. Only the test lets them
    # go, and only after this: a daemon that waited for any of them would never get here.
    task = daemon.wait_state(task_id, "succeeded", "failed")
    assert task["state"] == "succeeded" and task["final_message"] == "moved", task
    assert [e["kind"] for e in daemon.events(task_id)][-1] == "end"
    assert {path: receiver.hanging.get(path) for path in HELD} == {path: 1 for path in HELD}
    for hook in ("silent", "slow", "hanging"):
        assert metric(daemon, "cud_notify_delivered_total", hook=hook, event="approval_requested") == 0
        assert metric(daemon, "cud_notify_failed_total", hook=hook, event="approval_requested") == 0

    # Let go of two: what they held is delivered after all, and what queued behind it follows.
    receiver.release("/slow")
    receiver.release("/command")
    wait_until(lambda: metric(daemon, "cud_notify_delivered_total", hook="slow", event="task_finished") == 1
               and metric(daemon, "cud_notify_delivered_total", hook="hanging", event="approval_requested") == 1,
               30, "the held notifications to be delivered")
    assert [hit.body["event"] for hit in receiver.on("/slow")] == ["approval_requested", "task_finished"]
    assert [hit.body["event"] for hit in receiver.on("/command")] == ["approval_requested"]
    assert receiver.on("/command")[0].body["approval"]["id"] == approval["id"]
    # The silent one still holds on, neither delivered nor given up (the receiver lets go at the end).
    assert receiver.hanging.get("/silent") == 1
    assert metric(daemon, "cud_notify_failed_total", hook="silent", event="approval_requested") == 0


#: An attempt's timeout for the receivers that never answer: room for a request to arrive and a
#: command to start on a loaded machine, so that each attempt is seen to begin before it is cut.
ATTEMPT = 2.0


def test_failing_and_hanging_receivers_are_retried_as_stated(start_daemon, receiver: Receiver, short_tmp) -> None:
    pids = short_tmp / "pids"
    pids.mkdir()
    sleeper = write_script(short_tmp / "sleeper.sh", SHELL_SLEEPER, "/bin/sh")
    config = f"""
[[notify]]
name = "hang-short"
events = ["task_finished"]
webhook = "{receiver.url('/hang-short')}"
timeout = {ATTEMPT}
retries = 1
backoff = 0.05
[[notify]]
name = "fail"
events = ["task_finished"]
webhook = "{receiver.url('/fail')}"
retries = 3
backoff = 0.05
[[notify]]
name = "sleeper"
events = ["task_finished"]
command = ["{sleeper}", "{pids}"]
timeout = {ATTEMPT}
retries = 1
backoff = 0.05
"""
    daemon: Daemon = start_daemon(scenario({"message": "done"}), config=config)
    task_id = daemon.call("submit", prompt="nothing to do")["id"]
    assert daemon.wait_state(task_id, "succeeded", "failed")["state"] == "succeeded"

    def given_up(hook: str) -> bool:
        return metric(daemon, "cud_notify_failed_total", hook=hook, event="task_finished") == 1

    wait_until(lambda: given_up("hang-short") and given_up("sleeper") and given_up("fail"), 60,
               "the failing hooks to give up")
    assert len(receiver.on("/hang-short")) == 2  # the first attempt and its retry
    assert metric(daemon, "cud_notify_retries_total", hook="hang-short", event="task_finished") == 1
    assert len(receiver.on("/fail")) == 4  # the first attempt and its 3 retries
    assert metric(daemon, "cud_notify_retries_total", hook="fail", event="task_finished") == 3
    started = sorted(int(p.name) for p in pids.iterdir())
    assert len(started) == 2  # the sleeper was killed at its timeout, then tried once more
    for pid in started:
        assert not Path(f"/proc/{pid}").exists(), f"hook process {pid} outlived its timeout"
    assert metric(daemon, "cud_notify_delivered_total", hook="sleeper", event="task_finished") == 0
    log = daemon.log_text()
    assert "notify hook fail, task_finished (attempt 4 of 4): " in log and "HTTP 500" in log
    assert f"notify hook hang-short, task_finished (attempt 2 of 2): no answer within {ATTEMPT:g} s; giving up" in log
    assert f"notify hook sleeper, task_finished (attempt 2 of 2): no answer within {ATTEMPT:g} s; giving up" in log


def test_seat_health_changes_are_notified(xvfb: XServer, receiver: Receiver, start_daemon) -> None:
    config = f"""
[[notify]]
events = ["seat_unavailable", "seat_recovered", "task_failed"]
webhook = "{receiver.url('/plain')}"
"""
    daemon: Daemon = start_daemon(scenario({"message": "nothing"}), config=config)
    xvfb.stop()
    down = wait_until(lambda: receiver.on("/plain"), 60, "seat_unavailable")[0].body
    assert down["event"] == "seat_unavailable" and down["seat"]["name"] == "default"
    assert down["seat"]["where"] == xvfb.display and xvfb.display in down["seat"]["error"]
    back_server = restart_xvfb(xvfb)
    try:
        hits = wait_until(lambda: receiver.on("/plain")[1:], 60, "seat_recovered")
        assert hits[0].body["event"] == "seat_recovered" and hits[0].body["seat"]["error"] is None
        assert wait_until(lambda: daemon.call("seats")[0]["state"] == "idle", 30, "the seat to be idle")
    finally:
        daemon.stop()
        back_server.stop()
    assert [hit.body["event"] for hit in receiver.on("/plain")] == ["seat_unavailable", "seat_recovered"]


def test_a_denied_task_is_notified_as_finished_and_as_failed(start_daemon, receiver: Receiver) -> None:
    config = f"""
[[notify]]
events = ["task_finished", "task_failed"]
webhook = "{receiver.url('/plain')}"
"""
    daemon: Daemon = start_daemon(scenario(TYPE_STEP, {"message": "typed"}), config=config)
    task_id = daemon.call("submit", prompt="type ok")["id"]
    approval = daemon.wait_approval(task_id)
    daemon.call("deny", id=approval["id"], reason="not now")
    assert daemon.wait_state(task_id, "failed")["error"]["kind"] == "approval"
    hits = wait_until(lambda: receiver.on("/plain")[1:] and receiver.on("/plain"), 30, "two notifications")
    assert sorted(hit.body["event"] for hit in hits) == ["task_failed", "task_finished"]
    for hit in hits:
        task = hit.body["task"]
        assert task["id"] == task_id and task["state"] == "failed" and task["error"]["kind"] == "approval"
        assert "was denied by" in task["error"]["message"] and task["error"]["message"].endswith(": not now")


SLOW = scenario({"actions": [{"type": "wait"}], "delay": 60}, {"message": "done"})


def test_tasks_a_stop_or_a_crash_interrupts_are_notified(start_daemon, receiver: Receiver) -> None:
    config = f'[[notify]]\nevents = ["task_finished"]\nwebhook = "{receiver.url("/plain")}"\n'
    daemon: Daemon = start_daemon(SLOW, config=config)
    stopped = daemon.call("submit", prompt="stopped by SIGTERM")["id"]
    daemon.wait_state(stopped, "running")
    assert daemon.stop() == 0  # shutdown lets the interrupted task's notification go out first
    [hit] = receiver.on("/plain")
    assert hit.body["task"]["id"] == stopped and hit.body["task"]["state"] == "interrupted"
    assert "the daemon was stopped (SIGTERM)" in hit.body["task"]["reason"]

    again: Daemon = start_daemon(SLOW, config=config, workdir=daemon.dir)
    crashed = again.call("submit", prompt="lost to kill -9")["id"]
    again.wait_state(crashed, "running")
    again.kill9()
    start_daemon(SLOW, config=config, workdir=daemon.dir)  # finds it at start-up, and says so
    hits = wait_until(lambda: receiver.on("/plain")[1:], 30, "the crashed task's notification")
    assert [h.body["task"]["id"] for h in hits] == [crashed] and hits[0].body["task"]["state"] == "interrupted"
    assert "found at start-up" in hits[0].body["task"]["reason"]


SLEEPER = """
import os, sys, time
from pathlib import Path
Path(sys.argv[1], str(os.getpid())).write_text("")
time.sleep(600)
"""


def test_a_full_queue_drops_new_events_and_close_kills_a_running_hook(short_tmp: Path) -> None:
    import asyncio

    from cud.daemon.hooks.config import HookConfig
    from cud.daemon.hooks.delivery import QUEUE_SIZE, Notifications
    from cud.daemon.hooks.events import EventMaker
    from cud.daemon.store.database import Store

    pids = short_tmp / "pids"
    pids.mkdir()
    sleeper = write_script(short_tmp / "sleeper.py", SLEEPER)
    hook = HookConfig(name="slow", events=frozenset({"seat_unavailable"}), command=(str(sleeper), str(pids)),
                      timeout=300, concurrency=1)
    extra = 44

    async def run() -> tuple[Notifications, list[int]]:
        store = Store(short_tmp / "db.sqlite3")
        maker = EventMaker(short_tmp / "s", short_tmp / "trajectories")
        notifications = Notifications((hook,), store, maker)
        await notifications.start()
        # All at once, before the worker can take one: the queue holds QUEUE_SIZE, the rest are dropped.
        for n in range(QUEUE_SIZE + extra):
            notifications.emit(maker.seat_event("seat_unavailable", f"s{n}", ":9", "gone"))
        while not any(pids.iterdir()):
            await asyncio.sleep(0.02)
        started = [int(p.name) for p in pids.iterdir()]
        await notifications.close(grace=0)
        store.close()
        return notifications, started

    notifications, started = asyncio.run(run())
    registry = CollectorRegistry()
    notifications.register(registry)
    labels = {"hook": "slow", "event": "seat_unavailable"}
    assert registry.get_sample_value("cud_notify_dropped_total", labels) == extra
    assert registry.get_sample_value("cud_notify_delivered_total", labels) == 0
    assert len(started) == 1 and not Path(f"/proc/{started[0]}").exists()  # killed and reaped on close
