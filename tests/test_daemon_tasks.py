"""Whole tasks through the real daemon, the real SDK, a scripted model and a real Xvfb."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.daemon import ROOT, Daemon, cuctl, json_out, scenario
from tests.support.recorder import Recorder, wait_until

TEXT = "Grüße — ✓ ü € 東京"
FINAL = "I typed the greeting and pressed Enter."


def test_a_whole_task_types_exact_text_and_keeps_its_record(start_daemon, recorder: Recorder) -> None:
    daemon: Daemon = start_daemon(scenario(
        {"actions": [{"type": "click", "button": "left", "x": 200, "y": 150}]},
        {"actions": [{"type": "type", "text": TEXT}, {"type": "keypress", "keys": ["ENTER"]}]},
        {"message": FINAL},
    ))
    mark = recorder.mark()
    result = cuctl(daemon.socket, "submit", "type the greeting", "--wait")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == FINAL
    recorder.wait_text(TEXT + "\n")
    clicks = [e for e in recorder.events(mark) if e["type"] == "ButtonPress"]
    assert [(e["button"], e["x"], e["y"]) for e in clicks] == [(1, 200, 150)]

    task = json_out(cuctl(daemon.socket, "show", "1", "--json"))
    assert task["state"] == "succeeded" and task["final_message"] == FINAL and task["error"] is None
    assert task["steps"] == 4 and task["prompt"] == "type the greeting" and task["model"] == "gpt-5.4"
    assert task["created_at"] <= task["started_at"] <= task["finished_at"]

    events = daemon.events(1)
    steps = [e["data"] for e in events if e["kind"] == "step"]
    assert [s["step"] for s in steps] == [1, 2, 3, 4]
    assert [a["action"]["type"] for a in steps[2]["actions"]] == ["type", "keypress"]
    assert steps[2]["actions"][0]["action"]["text"] == TEXT
    assert steps[1]["saw"] == steps[0]["screenshot"]  # the screenshot the model saw is kept
    for s in steps:
        assert s["total_ms"] >= s["model_ms"] and s["overhead_ms"] >= 0
    shots = sorted((daemon.state_dir / "trajectories" / "1").iterdir())
    assert [p.name for p in shots] == ["step-0001.png", "step-0002.png", "step-0003.png"]
    for path in shots:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert stat.S_IMODE(shots[0].parent.stat().st_mode) == 0o700

    # The API key never lands in the database, the log or cuctl's output.
    key = daemon.api_key.encode()
    assert key not in (daemon.state_dir / "cud.sqlite3").read_bytes()
    assert key.decode() not in daemon.log_text()
    assert key.decode() not in result.stdout + result.stderr


def test_tasks_run_one_at_a_time_first_in_first_out(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario(
        {"actions": [{"type": "wait"}]},
        {"message": "done"},
    ))
    ids = [json_out(cuctl(daemon.socket, "submit", f"task number {n}", "--json"))["id"] for n in range(4)]
    tasks = [daemon.wait_state(i, "succeeded") for i in ids]
    # Each started only after the one before had finished.
    for earlier, later in itertools.pairwise(tasks):
        assert earlier["finished_at"] <= later["started_at"]
    prompts = [r["input"][0]["content"] for r in daemon.model.requests if "previous_response_id" not in r]
    assert prompts == [f"task number {n}" for n in range(4)]


def test_max_steps_ends_the_task_with_a_clear_error(start_daemon) -> None:
    daemon = start_daemon(scenario(*[{"actions": [{"type": "wait"}]}] * 5, {"message": "never"}))
    result = cuctl(daemon.socket, "submit", "loop", "--max-steps", "2", "--wait")
    assert result.returncode == 1
    task = daemon.task(1)
    assert task["state"] == "failed" and "max_steps" in task["error"]["message"]
    assert "max_steps" in result.stderr
    # above the daemon's ceiling is refused at the door
    refused = cuctl(daemon.socket, "submit", "loop", "--max-steps", "1000")
    assert refused.returncode == 2 and "above the daemon's limit of 50" in refused.stderr


def test_an_off_screen_action_fails_the_task_and_reaches_nothing(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "click", "button": "left", "x": 5000, "y": 10}]},
                                   {"message": "never"}))
    mark = recorder.mark()
    assert cuctl(daemon.socket, "submit", "click off screen", "--wait").returncode == 1
    task = daemon.task(1)
    assert task["state"] == "failed" and task["error"]["kind"] == "out_of_bounds"
    assert "(5000, 10)" in task["error"]["message"] and "1280x800" in task["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] != "Motion"] == []


def test_malformed_actions_fail_with_a_clear_error_and_reach_nothing(start_daemon, recorder: Recorder) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "click", "button": "left", "x": "ten", "y": 1}]},
                                   {"message": "never"}))
    mark = recorder.mark()
    daemon.call("submit", prompt="bad coordinates")
    task = daemon.wait_state(1, "failed")
    assert task["error"]["kind"] == "computer_use" and "Invalid computer action" in task["error"]["message"]

    daemon.model.stop()
    unknown = start_daemon(scenario({"actions": [{"type": "keypress", "keys": ["NO_SUCH_KEY"]}]},
                                    {"message": "never"}))
    unknown.call("submit", prompt="unknown key")
    task = unknown.wait_state(1, "failed")
    assert task["error"]["kind"] == "unknown_key" and "'NO_SUCH_KEY'" in task["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] in ("KeyPress", "ButtonPress")] == []


def test_cancel_a_running_and_a_queued_task(start_daemon, recorder: Recorder) -> None:
    # The model's second answer never comes within the test: only a cancel can end a task.
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}], "delay": 3600}, {"message": "never"}))
    first = daemon.call("submit", prompt="slow")["id"]
    second = daemon.call("submit", prompt="queued")["id"]
    wait_until(lambda: any("previous_response_id" in r for r in daemon.model.requests), 30, "the second model request")
    assert daemon.task(first)["state"] == "running"
    result = cuctl(daemon.socket, "cancel", str(first))
    assert result.returncode == 0 and "cancel requested" in result.stdout
    task = daemon.wait_state(first, "cancelled")
    assert "cancelled by root" in task["reason"]
    # The second task then runs into the same slow model, and holds the seat while a
    # third one waits in the queue: a queued task is cancelled on the spot.
    daemon.wait_state(second, "running")
    third = daemon.call("submit", prompt="never starts")["id"]
    assert daemon.task(third)["state"] == "queued"
    assert daemon.call("cancel", id=third)["state"] == "cancelled"
    assert daemon.task(third)["started_at"] is None
    daemon.call("cancel", id=second)
    daemon.wait_state(second, "cancelled")
    assert daemon.task(third)["state"] == "cancelled" and daemon.task(third)["started_at"] is None
    # Cancelled: nobody judged it, so its outcome is error (cud.outcome), exit 3, not a failure.
    assert cuctl(daemon.socket, "follow", str(first)).returncode == 3


def test_an_api_error_fails_the_task_without_leaking_the_key(start_daemon) -> None:
    daemon = start_daemon(scenario({"http_error": 400, "body": {"error": {"message": "bad request here",
                                                                          "type": "invalid_request_error"}}}))
    daemon.call("submit", prompt="x")
    task = daemon.wait_state(1, "failed")
    assert task["error"]["kind"] == "api" and "bad request here" in task["error"]["message"]
    assert task["error"]["details"] == {"status": 400}
    # The model's API refused cud's request: cud could not do its part, an error (exit 3), not the task's failure.
    followed = cuctl(daemon.socket, "follow", "1")
    assert followed.returncode == 3 and "outcome error" in followed.stderr, followed.stderr
    db = sqlite3.connect(daemon.state_dir / "cud.sqlite3")
    dump = json.dumps([list(r) for r in db.execute("SELECT * FROM events")])
    assert daemon.api_key not in dump


def test_the_socket_is_not_world_accessible(start_daemon) -> None:
    daemon = start_daemon(scenario({"message": "hi"}, look_first=False))
    mode = stat.S_IMODE(Path(daemon.socket).stat().st_mode)
    assert mode & 0o007 == 0 and mode & 0o600 == 0o600
    assert stat.S_IMODE((daemon.state_dir / "cud.sqlite3").stat().st_mode) == 0o600


def test_retention_removes_old_tasks_with_their_screenshots(start_daemon) -> None:
    daemon = start_daemon(scenario({"message": "done"}), config="[retention]\nmax_tasks = 1\n")
    first = daemon.call("submit", prompt="one")["id"]
    daemon.wait_state(first, "succeeded")
    assert (daemon.state_dir / "trajectories" / str(first) / "step-0001.png").exists()
    second = daemon.call("submit", prompt="two")["id"]
    wait_until(lambda: [t["id"] for t in daemon.call("list")] == [second], 30, "the first task to be pruned")
    assert not (daemon.state_dir / "trajectories" / str(first)).exists()
    assert (daemon.state_dir / "trajectories" / str(second) / "step-0001.png").exists()


REQUEST = """
[request]
truncation = "auto"
reasoning = { effort = "low" }
[[request.context_management]]
type = "compaction"
compact_threshold = 200000
"""


def test_the_request_table_reaches_the_model_in_every_request(start_daemon) -> None:
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}]}, {"message": "done"}), config=REQUEST)
    task_id = daemon.call("submit", prompt="bounded history")["id"]
    daemon.wait_state(task_id, "succeeded")
    bodies = daemon.model.requests
    assert len(bodies) == 3
    for body in bodies:  # every turn, as the scripted model received it
        assert body["truncation"] == "auto" and body["reasoning"] == {"effort": "low"}
        assert body["context_management"] == [{"type": "compaction", "compact_threshold": 200000}]
        assert body["model"] == "gpt-5.4" and body["tools"] == [{"type": "computer"}]
    assert bodies[0]["input"] == [{"role": "user", "content": "bounded history"}]


def test_a_bad_request_table_stops_the_daemon_at_start_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "cud.toml"
    config.write_text("[request]\ntools = []\n")
    result = subprocess.run(
        [sys.executable, "-m", "cud.daemon.main", "run", "--config", str(config), "--display", ":99",
         "--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )
    assert result.returncode == 2
    assert "config key 'request.tools' cannot be set: the computer loop owns it" in result.stderr


def test_a_task_past_its_max_duration_fails_with_a_timeout(start_daemon) -> None:
    # The model never answers its second turn, and an approval is never given: only the
    # wall-clock limit can end either task.
    daemon = start_daemon(scenario({"actions": [{"type": "wait"}], "delay": 3600}, {"message": "never"}),
                          config="max_duration = 30\n")
    refused = cuctl(daemon.socket, "submit", "too long", "--max-duration", "31")
    assert refused.returncode == 2 and "'max_duration' is 31 s, above the daemon's limit of 30 s" in refused.stderr
    task_id = json_out(cuctl(daemon.socket, "submit", "slow model", "--max-duration", "2", "--json"))["id"]
    assert daemon.task(task_id)["max_duration"] == 2
    task = daemon.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "timeout" and task["error"]["details"] == {"max_duration": 2}
    assert f"task {task_id} ran past its max_duration of 2 s" in task["error"]["message"]
    assert task["reason"] == "ran past its max_duration of 2 s"
    assert "timeout: task 1 ran past its max_duration of 2 s" in cuctl(daemon.socket, "show", str(task_id)).stdout
    assert cuctl(daemon.socket, "follow", str(task_id)).returncode == 1


def test_max_duration_covers_the_wait_for_an_approval(start_daemon, recorder: Recorder) -> None:
    step = {"safety_checks": [{"code": "c", "message": "m"}], "actions": [{"type": "type", "text": "x"}]}
    daemon = start_daemon(scenario(step, {"message": "done"}), config="max_duration = 2\n")
    task_id = daemon.call("submit", prompt="ask and wait")["id"]
    approval = daemon.wait_approval(task_id)
    task = daemon.wait_state(task_id, "failed")
    assert task["error"]["kind"] == "timeout"
    assert daemon.call("approvals") == []
    late = cuctl(daemon.socket, "approve", str(approval["id"]))
    assert late.returncode == 2
    assert not any(e["type"] == "KeyPress" for e in recorder.fenced()) and recorder.text() == ""
