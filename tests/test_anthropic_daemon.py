"""Claude's computer tool through the real daemon, the real anthropic SDK over HTTP, the scripted
Messages server and a real Xvfb: what arrives at the X server is checked exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cud.daemon.config import DEFAULT_MODEL
from cud.errors import CudError
from cud.scripted.messages import ScriptedMessages
from tests.support.daemon import ROOT, Daemon
from tests.support.model_runs import check_api_errors, check_max_cost, run_approving
from tests.support.recorder import Recorder
from tests.support.xserver import start_xvfb

KEY_ENV = "CUD_TEST_ANTHROPIC_KEY"
KEY = "sk-ant-test-cud-secret-0123456789"
TEXT = "Grüße — ✓ ü € 東京"
LOOK = {"actions": [{"action": "screenshot"}]}
#: The scenarios of these tests, each played by the [models] entry "claude-NAME".
SCENARIOS: dict[str, dict[str, Any]] = {
    "work": {"name": "work", "steps": [
        LOOK,
        {"actions": [{"type": "click", "button": "left", "x": 200, "y": 150}]},
        {"actions": [{"action": "left_click_drag", "start_coordinate": [100, 100], "coordinate": [300, 200]}]},
        {"actions": [{"action": "type", "text": TEXT}, {"action": "key", "text": "ctrl+s"},
                     {"action": "key", "text": "Return"}]},
        {"actions": [{"action": "scroll", "coordinate": [640, 400], "scroll_direction": "down", "scroll_amount": 3}]},
        {"message": "All done."},
    ]},
    "corners": {"name": "corners", "steps": [
        LOOK,
        {"actions": [{"action": "left_click", "coordinate": [1428, 803]}, {"action": "left_click", "coordinate": [0, 0]},
                     {"action": "left_click", "coordinate": [700, 400]}]},
        {"message": "clicked"},
    ]},
    "loop": {"name": "loop", "steps": [LOOK, *[{"actions": [{"action": "left_click", "coordinate": [640, 400]}]}] * 6,
                                       {"message": "never"}]},
    "off": {"name": "off", "steps": [LOOK, {"actions": [{"action": "left_click", "coordinate": [1280, 5]}]},
                                     {"message": "never"}]},
    "unknown": {"name": "unknown", "steps": [LOOK, {"actions": [{"action": "teleport", "coordinate": [1, 1]}]},
                                             {"message": "never"}]},
    "bad": {"name": "bad", "steps": [{"http_error": 400, "body": {"type": "error", "error": {
        "type": "invalid_request_error", "message": "bad request here"}}}]},
    "busy": {"name": "busy", "steps": [{"http_error": 429, "times": 1, "headers": {"retry-after-ms": "10"}},
                                       {"message": "after the retry"}]},
    "down": {"name": "down", "steps": [{"http_error": 500, "headers": {"retry-after-ms": "10"}}]},
}


#: Claude's "work" model priced: $1 a turn (the scripted server counts 20 output tokens a block).
BUDGET = '[budget]\non_budget = "fail"\n[budget.prices."claude-work"]\ninput = 0\ncached_input = 0\noutput = 50_000\n'


def _config(url: str) -> str:
    return BUDGET + "".join(f'[models.claude-{name}]\napi = "anthropic"\nmodel = "scripted:{name}"\nbase_url = "{url}"\n'
                   f'api_key_env = "{KEY_ENV}"\n' for name in SCENARIOS)


@pytest.fixture
def claude_daemon(tmp_path: Path) -> Iterator[Callable[..., tuple[Daemon, ScriptedMessages]]]:
    """``claude_daemon(display)``: the scripted Messages server and a daemon whose [models] play its scenarios."""
    made: list[tuple[Daemon, ScriptedMessages]] = []

    def start(display: str) -> tuple[Daemon, ScriptedMessages]:
        server = ScriptedMessages(SCENARIOS["work"], scenarios=SCENARIOS)
        url = server.start()
        daemon = Daemon(display, url, config=_config(url), extra_env={KEY_ENV: KEY})
        made.append((daemon, server))
        return daemon.start(), server

    yield start
    for daemon, server in reversed(made):
        daemon.cleanup()
        server.stop()


def _presses(recorder: Recorder, mark: int, kind: str = "ButtonPress") -> list[tuple[int, int, int]]:
    return [(e["button"], e["x"], e["y"]) for e in recorder.events(mark) if e["type"] == kind]


def test_a_task_clicks_drags_types_presses_a_chord_scrolls_and_finishes(claude_daemon, xvfb, recorder) -> None:
    daemon, server = claude_daemon(xvfb.display)
    mark = recorder.mark()
    task = run_approving(daemon, "claude-work")
    assert task["state"] == "succeeded", task["error"]
    assert task["final_message"] == "All done." and task["model"] == "claude-work"
    recorder.wait_text(TEXT + "\n")
    assert _presses(recorder, mark) == [(1, 200, 150), (1, 100, 100), (5, 640, 400), (5, 640, 400), (5, 640, 400)]
    assert _presses(recorder, mark, "ButtonRelease")[:2] == [(1, 200, 150), (1, 300, 200)]
    keys = [(e["keysym"], e["state"] & 4) for e in recorder.events(mark) if e["type"] == "KeyPress"]
    assert ("s", 4) in keys and keys[-1] == ("Return", 0)  # ctrl held for s, not for Return
    sent = server.requests
    assert [r["model"] for r in sent] == ["scripted:work"] * 6
    tool = sent[0]["tools"][0]
    assert (tool["type"], tool["display_width_px"], tool["display_height_px"]) == ("computer_20250124", 1280, 800)
    assert sent[0]["messages"][0]["content"][0]["text"] == "do it"
    # The last user turn ends the cached prefix; every turn's last tool result carries the screen.
    last = sent[-1]["messages"][-1]
    assert last["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert [b["type"] for b in last["content"][-1]["content"]] == ["image"]
    # One breakpoint per request: the marker moves on from each earlier turn (the API allows four).
    assert [sum("cache_control" in b for m in r["messages"] for b in m["content"]) for r in sent] == [1] * 6
    events = daemon.events(task["id"])
    steps = [e["data"] for e in events if e["kind"] == "step"]
    assert [a["action"]["type"] for s in steps for a in s["actions"]] == [
        "click", "drag", "type", "keypress", "keypress", "scroll"]
    assert all(s["tokens"]["input_tokens"] > 0 for s in steps if s.get("tokens")) and len(steps) == 6
    assert KEY not in daemon.log_text()


def test_a_scaled_screen_lands_each_click_on_the_native_pixel_meant(claude_daemon, tmp_path: Path) -> None:
    big = start_xvfb(tmp_path, 1920, 1080)
    recorder = Recorder(big.display, tmp_path, "1920x1080+0+0")
    try:
        daemon, server = claude_daemon(big.display)
        mark = recorder.mark()
        assert run_approving(daemon, "claude-corners")["state"] == "succeeded"
        # 1920x1080 fits 1568 px and 1.15 MP at 1429x804: model pixel (x, y) covers native
        # [x*1920/1429, (x+1)*1920/1429): (700, 400) covers x 940.5..941.8, y 537.3..538.6, centre (941, 537).
        assert _presses(recorder, mark) == [(1, 1919, 1079), (1, 0, 0), (1, 941, 537)]
        tool = server.requests[0]["tools"][0]
        assert (tool["display_width_px"], tool["display_height_px"]) == (1429, 804)
    finally:
        recorder.stop()
        big.stop()


def test_bad_input_and_api_errors_end_the_task_with_a_clear_error(claude_daemon, xvfb, recorder) -> None:
    daemon, server = claude_daemon(xvfb.display)
    mark = recorder.mark()
    off = run_approving(daemon, "claude-off")
    assert off["state"] == "failed" and off["error"]["kind"] == "out_of_bounds", off
    assert "(1280, 5)" in off["error"]["message"] and "1280x800" in off["error"]["message"]
    unknown = run_approving(daemon, "claude-unknown")
    assert unknown["state"] == "failed" and unknown["error"]["kind"] == "computer_use", unknown
    assert "unknown computer action 'teleport'" in unknown["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] in ("ButtonPress", "KeyPress")] == []

    # The stuck guard holds for Claude too: the same click on an unchanged screen, stopped at repeat_limit.
    mark = recorder.mark()
    loop = run_approving(daemon, "claude-loop", repeat_limit=3, on_stuck="fail")
    assert loop["state"] == "stuck" and loop["error"]["kind"] == "stuck", loop["error"]
    assert _presses(recorder, mark) == [(1, 640, 400)] * 2  # the third, the one stopped, never ran

    check_api_errors(daemon, "claude")
    # A priced Claude stops at its max_cost: two turns at $1, and the third request never goes out.
    check_max_cost(daemon, lambda: len(server.requests), "claude-work")
    assert KEY not in daemon.log_text()


def test_approval_safety_is_refused_at_submit_for_the_anthropic_api(claude_daemon, xvfb) -> None:
    daemon, server = claude_daemon(xvfb.display)
    with pytest.raises(CudError) as caught:
        daemon.call("submit", prompt="x", model="claude-work")  # the daemon's default approval: safety
    assert "'safety'" in caught.value.message and "'actions'" in caught.value.message
    assert "'claude-work'" in caught.value.message
    with pytest.raises(CudError, match="no task with id 1"):
        daemon.task(1)  # nothing was queued
    assert server.requests == []
    # With approval "actions" it runs, and asks before its first action; a cancel then ends it cleanly.
    task_id = daemon.call("submit", prompt="x", model="claude-work", approval="actions")["id"]
    approval = daemon.wait_approval(task_id)
    assert approval["kind"] == "action" and approval["actions"] == [
        {"type": "click", "x": 200, "y": 150, "button": "left"}]
    daemon.call("cancel", id=task_id)
    cancelled = daemon.wait_state(task_id, "cancelled")
    assert cancelled["error"] is None and cancelled["final_message"] is None


def test_a_missing_api_key_is_named_at_start_up(tmp_path: Path) -> None:
    config = tmp_path / "cud.toml"
    config.write_text('[models.claude]\napi = "anthropic"\napi_key_env = "CUD_TEST_UNSET_KEY"\n')
    env = {k: v for k, v in os.environ.items() if k != "CUD_TEST_UNSET_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "cud.daemon.main", "run", "--config", str(config), "--display", ":99",
         "--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**env, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x"},
    )
    assert result.returncode == 2, result.stderr
    assert "CUD_TEST_UNSET_KEY" in result.stderr and "'claude'" in result.stderr


def _needs_the_openai_key(message: str, model: str) -> None:
    """The error names the model and every place the daemon's own key is read from."""
    assert f"{model!r}" in message and "the daemon has none" in message, message
    assert all(place in message for place in ("OPENAI_API_KEY", "'api_key_file'", "'api_key_credential'")), message


def test_a_daemon_without_an_openai_key_runs_claude_and_refuses_the_models_that_need_it(xvfb, recorder) -> None:
    server = ScriptedMessages(SCENARIOS["work"], scenarios=SCENARIOS)
    url = server.start()
    # A responses entry with a base_url but no key of its own needs the daemon's key too.
    config = _config(url) + '[models.gpt-eu]\nbase_url = "http://127.0.0.1:9/v1"\n'
    daemon = Daemon(xvfb.display, "http://127.0.0.1:9/v1", config=config, extra_env={KEY_ENV: KEY},
                    approval="actions")
    del daemon.env["OPENAI_API_KEY"]  # no api_key_file, no api_key_credential either
    try:
        daemon.start()
        for model in ("gpt-eu", "computer-use-preview", None):  # None: the daemon's default model
            fields = {} if model is None else {"model": model}
            with pytest.raises(CudError) as caught:
                daemon.call("submit", prompt="x", **fields)
            assert caught.value.kind == "config"
            _needs_the_openai_key(caught.value.message, model or DEFAULT_MODEL)
        with pytest.raises(CudError, match="no task with id 1"):
            daemon.task(1)  # nothing was queued
        task = run_approving(daemon, "claude-work")
        assert task["state"] == "succeeded", task["error"]
        recorder.wait_text(TEXT + "\n")
    finally:
        daemon.cleanup()
        server.stop()


def test_a_task_queued_before_a_restart_without_the_key_fails_naming_it(xvfb, tmp_path: Path) -> None:
    server = ScriptedMessages(SCENARIOS["work"], scenarios=SCENARIOS)
    url = server.start()
    daemon = Daemon(xvfb.display, "http://127.0.0.1:9/v1", workdir=tmp_path, config=_config(url),
                    extra_env={KEY_ENV: KEY}, approval="actions")
    try:
        daemon.start()
        busy = daemon.call("submit", prompt="x", model="claude-loop")["id"]
        daemon.wait_approval(busy)  # the seat is taken: the next task waits in the queue
        queued = daemon.call("submit", prompt="y", model="computer-use-preview")["id"]
        assert daemon.task(queued)["state"] == "queued"
        daemon.stop()
        del daemon.env["OPENAI_API_KEY"]
        daemon.start()
        failed = daemon.wait_state(queued, "failed", "succeeded", timeout=120)
        assert failed["state"] == "failed" and failed["error"]["kind"] == "config", failed
        _needs_the_openai_key(failed["error"]["message"], "computer-use-preview")
    finally:
        daemon.cleanup()
        server.stop()


def test_a_key_file_the_config_names_but_cannot_be_read_still_stops_the_start(tmp_path: Path) -> None:
    config = tmp_path / "cud.toml"
    config.write_text(f'api_key_file = "{tmp_path / "missing-key"}"\n')
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "cud.daemon.main", "run", "--config", str(config), "--display", ":99",
         "--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=False, env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 2, result.stderr
    assert "api_key_file" in result.stderr and "missing-key" in result.stderr, result.stderr
