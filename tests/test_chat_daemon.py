"""Open models over chat completions through the real daemon, the real openai SDK over HTTP, the
scripted chat server (writing each answer in a chat format's grammar) and a real Xvfb: what arrives
at the X server is checked exactly, for each format."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from cud.errors import CudError
from cud.model_api.chat import FORMATS as ALL_FORMATS
from cud.model_api.chat import ChatFormat, format_for
from cud.scripted.chat import ScriptedChat
from tests.support.daemon import ROOT, Daemon
from tests.support.model_runs import check_api_errors, check_max_cost, run_approving
from tests.support.recorder import Recorder, presses
from tests.support.xserver import start_xvfb

#: The formats tested end to end: every one of cud.model_api.chat.
FORMATS = list(ALL_FORMATS)
#: The formats whose models can ask the user, and those that can say they failed.
ASKING = [name for name in FORMATS if name == "ui-tars"]
GIVING_UP = [name for name in FORMATS if name != "ui-tars"]
KEY_ENV = "CUD_TEST_CHAT_KEY"
KEY = "sk-chat-test-cud-secret-0123456789"
TEXT = "Grüße — ✓ ü € 東京"
#: One scroll a format can say: five notches down (UI-TARS's one scroll is pyautogui.scroll(5)).
SCROLL = {"type": "scroll", "x": 640, "y": 400, "scroll_x": 0, "scroll_y": 500}
#: The scenarios of these tests, each played by the [models] entry "chat-NAME"; coordinates are in the
#: model's space (the screenshot as the format sent it).
SCENARIOS: dict[str, dict[str, Any]] = {
    "work": {"name": "work", "steps": [
        {"actions": [{"type": "click", "button": "left", "x": 200, "y": 150}], "message": "the field first"},
        {"actions": [{"type": "drag", "path": [{"x": 100, "y": 100}, {"x": 300, "y": 200}]}]},
        {"actions": [{"type": "type", "text": TEXT}, {"type": "keypress", "keys": ["ctrl", "s"]},
                     {"type": "keypress", "keys": ["Return"]}]},
        {"actions": [SCROLL]},
        {"message": "All done."},
    ]},
    # Longer than any format's history: its requests stop growing, and the server still counts its turns.
    "long": {"name": "long", "steps": [*({"actions": [{"type": "click", "button": "left", "x": 20 + 60 * n, "y": 40}]}
                                         for n in range(9)), {"message": "long done"}]},
    "loop": {"name": "loop", "steps": [*[{"actions": [{"type": "click", "button": "left", "x": 640, "y": 400}]}] * 6,
                                       {"message": "never"}]},
    "garbled": {"name": "garbled", "steps": [{"text": "I would click the OK button now, I think."}]},
    "gave": {"name": "gave", "steps": [{"gave_up": "I could not find the file anywhere"}]},
    # Where the pointer is: a scroll with no point before the pointer went anywhere, and one after a move.
    "nowhere": {"name": "nowhere", "steps": [{"actions": [{"type": "scroll", "scroll_x": 0, "scroll_y": 300}]}]},
    "pointed": {"name": "pointed", "steps": [
        {"actions": [{"type": "move", "x": 300, "y": 200}, {"type": "scroll", "scroll_x": 0, "scroll_y": 300}]},
        {"message": "scrolled"}]},
    "off": {"name": "off", "steps": [{"actions": [{"type": "click", "button": "left", "x": 5000, "y": 5}]}]},
    "ask": {"name": "ask", "steps": [{"call_user": "Which of the two files should I keep?"},
                                     {"actions": [{"type": "click", "button": "left", "x": 10, "y": 10}]},
                                     {"message": "kept it"}]},
    "bad": {"name": "bad", "steps": [{"http_error": 400, "body": {"error": {
        "message": "bad request here", "type": "BadRequestError", "param": None, "code": 400}}}]},
    "busy": {"name": "busy", "steps": [{"http_error": 429, "times": 1, "headers": {"retry-after-ms": "10"}},
                                       {"message": "after the retry"}]},
    "down": {"name": "down", "steps": [{"http_error": 500, "headers": {"retry-after-ms": "10"}}]},
}
#: The "work" model priced: $1 an answer (the scripted chat server counts 20 output tokens each).
BUDGET = '[budget]\non_budget = "fail"\n[budget.prices."chat-work"]\ninput = 0\ncached_input = 0\noutput = 50_000\n'


def _config(url: str, fmt: str, names: list[str]) -> str:
    entries = "".join(f'[models.chat-{name}]\napi = "chat"\nmodel = "scripted:{name}"\nbase_url = "{url}"\n'
                      f'format = "{fmt}"\n' for name in names)
    # One entry with a key of its own: it is sent, and never shown.
    keyed = f'[models.chat-keyed]\napi = "chat"\nmodel = "scripted:work"\nbase_url = "{url}"\nformat = "{fmt}"\n' \
            f'api_key_env = "{KEY_ENV}"\n'
    return BUDGET + entries + keyed


@pytest.fixture(params=FORMATS)
def chat_daemon(request: pytest.FixtureRequest) -> Iterator[Callable[..., tuple[Daemon, ScriptedChat]]]:
    """``chat_daemon(display, extra)``: the scripted chat server in one format (``.format``) and a daemon
    whose [models] play its scenarios (and the ``extra`` ones, by a function of the format)."""
    made: list[tuple[Daemon, ScriptedChat]] = []
    fmt = request.param

    def start(display: str, extra: Callable[[ChatFormat], dict[str, Any]] | None = None,
              ) -> tuple[Daemon, ScriptedChat]:
        scenarios = {**SCENARIOS, **_by_format(format_for(fmt)), **(extra(format_for(fmt)) if extra is not None else {})}
        server = ScriptedChat(SCENARIOS["work"], format=fmt, scenarios=scenarios)
        url = server.start()
        daemon = Daemon(display, url, config=_config(url, fmt, list(scenarios)), extra_env={KEY_ENV: KEY})
        made.append((daemon, server))
        return daemon.start(), server

    yield start
    for daemon, server in reversed(made):
        daemon.cleanup()
        server.stop()


def _by_format(fmt: ChatFormat) -> dict[str, Any]:
    """The scenarios written in the format's own text."""
    click = fmt.render([{"type": "click", "button": "left", "x": 20, "y": 30}], thought="the box")
    # An answer the server cut at its token limit that still parses: it runs, and the cut is an event.
    return {"cut": {"name": "cut", "steps": [{"text": click, "finish_reason": "length"}, {"message": "done"}]}}


def _image_size(request: dict[str, Any]) -> tuple[int, int]:
    """The size of the last image a request carried: the model's space, as the model saw it."""
    parts = [p for m in request["messages"] if isinstance(m["content"], list) for p in m["content"]
             if p.get("type") == "image_url"]
    data = parts[-1]["image_url"]["url"].split(",", 1)[1]
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        return image.size


def _native(x: int, y: int, seen: tuple[int, int], screen: tuple[int, int]) -> tuple[int, int]:
    """The native pixel under the centre of model pixel (x, y) of a ``seen``-sized image of the ``screen``:
    model pixel x covers native [x*W/w, (x+1)*W/w)."""
    return (2 * x + 1) * screen[0] // (2 * seen[0]), (2 * y + 1) * screen[1] // (2 * seen[1])


def test_a_task_clicks_drags_types_presses_a_chord_scrolls_and_finishes(chat_daemon, xvfb, recorder) -> None:
    daemon, server = chat_daemon(xvfb.display)
    mark = recorder.mark()
    decided: list[dict[str, Any]] = []
    task = run_approving(daemon, "chat-work", decided=decided)
    assert task["state"] == "succeeded", task["error"]
    assert task["final_message"] == "All done." and task["model"] == "chat-work"
    recorder.wait_text(TEXT + "\n")
    sent = server.requests
    seen, screen = _image_size(sent[0]), (1280, 800)

    def at(x: int, y: int) -> tuple[int, int]:
        return _native(x, y, seen, screen)

    assert presses(recorder.events(mark)) == [(1, *at(200, 150)), (1, *at(100, 100)), *[(5, *at(640, 400))] * 5]
    assert presses(recorder.events(mark), "ButtonRelease")[:2] == [(1, *at(200, 150)), (1, *at(300, 200))]
    keys = [(e["keysym"], e["state"] & 4) for e in recorder.events(mark) if e["type"] == "KeyPress"]
    assert ("s", 4) in keys and keys[-1] == ("Return", 0)  # ctrl held for s, not for Return
    # Every action passed the checkpoint before it ran: approval "actions" asked about each one.
    assert [a["kind"] for a in decided] == ["action"] * 6
    assert [a["actions"][0]["type"] for a in decided] == ["click", "drag", "type", "keypress", "keypress", "scroll"]
    assert [r["model"] for r in sent] == ["scripted:work"] * 5
    # Every request carries the task's prompt and ends with the screen; at most the format's last turns.
    assert all(any("do it" in str(m["content"]) for m in r["messages"] if m["role"] != "assistant") for r in sent)
    assert all(r["messages"][-1]["role"] == "user" for r in sent)
    assert sum(m["role"] == "assistant" for m in sent[-1]["messages"]) == min(4, format_for(server.format).HISTORY)
    events = daemon.events(task["id"])
    steps = [e["data"] for e in events if e["kind"] == "step"]
    assert [a["action"]["type"] for s in steps for a in s["actions"]] == [
        "click", "drag", "type", "keypress", "keypress", "scroll"]
    assert len(steps) == 5 and all(s["output_tokens"] == 20 and s["input_tokens"] > 0 for s in steps)
    # Each step saw the screen its request carried: the first one's too (kept apart from the one after its actions).
    assert [s["saw"] for s in steps] == ["step-0001-seen.png", *(f"step-{n:04d}.png" for n in range(1, 5))]
    assert "the field first" in steps[0]["messages"][0]  # the model's answer, as it wrote it
    # An entry with its own key sends it (the server wants one) and never shows it.
    keyed = run_approving(daemon, "chat-keyed")
    assert keyed["state"] == "succeeded", keyed["error"]
    assert KEY not in daemon.log_text() and KEY not in str(daemon.events(keyed["id"]))


def test_a_long_run_sends_only_the_formats_last_turns(chat_daemon, xvfb, recorder) -> None:
    daemon, server = chat_daemon(xvfb.display)
    mark = recorder.mark()
    task = run_approving(daemon, "chat-long")
    assert task["state"] == "succeeded" and task["final_message"] == "long done", task["error"]
    seen = _image_size(server.requests[0])
    assert presses(recorder.events(mark)) == [(1, *_native(20 + 60 * n, 40, seen, (1280, 800))) for n in range(9)]
    history = format_for(server.format).HISTORY
    answers = [sum(m["role"] == "assistant" for m in r["messages"]) for r in server.requests]
    assert answers == [min(n, history) for n in range(10)]


@pytest.mark.parametrize("size", [(1920, 1080), (1001, 667)])
def test_a_resized_screen_lands_each_click_on_the_native_pixel_meant(chat_daemon, tmp_path: Path,
                                                                     size: tuple[int, int]) -> None:
    def corners(fmt: ChatFormat) -> dict[str, Any]:
        space = fmt.space(*size)
        w, h = space.model_width, space.model_height
        points = [(w - 1, h - 1), (0, 0), (w // 2 + 1, h // 3 + 1)]
        return {"corners": {"name": "corners", "steps": [
            {"actions": [{"type": "click", "button": "left", "x": x, "y": y} for x, y in points]},
            {"message": "clicked"}]}}

    screen = start_xvfb(tmp_path, *size)
    recorder = Recorder(screen.display, tmp_path, f"{size[0]}x{size[1]}+0+0")
    try:
        daemon, server = chat_daemon(screen.display, corners)
        mark = recorder.mark()
        task = run_approving(daemon, "chat-corners")
        assert task["state"] == "succeeded", task["error"]
        # Where the model's pixels land is checked against the image it was actually shown.
        seen = _image_size(server.requests[0])
        assert seen != size  # the format resized the screen (smart resize): the mapping is exercised
        w, h = seen
        assert presses(recorder.events(mark)) == [
            (1, size[0] - 1, size[1] - 1), (1, 0, 0), (1, *_native(w // 2 + 1, h // 3 + 1, seen, size))]
    finally:
        recorder.stop()
        screen.stop()


def test_bad_input_and_api_errors_end_the_task_with_a_clear_error(chat_daemon, xvfb, recorder) -> None:
    daemon, server = chat_daemon(xvfb.display)
    mark = recorder.mark()
    garbled = run_approving(daemon, "chat-garbled")
    assert garbled["state"] == "failed" and garbled["error"]["kind"] == "computer_use", garbled
    assert "I would click the OK button now, I think." in garbled["error"]["message"]
    off = run_approving(daemon, "chat-off")
    assert off["state"] == "failed" and off["error"]["kind"] == "out_of_bounds", off
    assert "5000" in off["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] in ("ButtonPress", "KeyPress")] == []

    # The stuck guard holds here too: the same click on an unchanged screen, stopped at repeat_limit.
    mark = recorder.mark()
    loop = run_approving(daemon, "chat-loop", repeat_limit=3, on_stuck="fail")
    assert loop["state"] == "stuck" and loop["error"]["kind"] == "stuck", loop["error"]
    seen = _image_size(server.requests[-1])
    assert presses(recorder.events(mark)) == [(1, *_native(640, 400, seen, (1280, 800)))] * 2  # the third never ran

    cut = run_approving(daemon, "chat-cut")
    assert cut["state"] == "succeeded", cut["error"]
    diagnostics = [e["data"] for e in daemon.events(cut["id"]) if e["kind"] == "diagnostic"]
    assert [(d["reason"], d["api"]) for d in diagnostics] == [("length", "chat")]

    check_api_errors(daemon, "chat")
    # A priced chat model stops at its max_cost: two answers at $1, and the third request never goes out.
    check_max_cost(daemon, lambda: len(server.requests), "chat-work")


def _asks_the_user(approval: dict[str, Any]) -> bool:
    return approval["kind"] == "safety" and [c["code"] for c in approval["checks"]] == ["call_user"]


@pytest.mark.parametrize("chat_daemon", ASKING, indirect=True)
def test_a_question_to_the_user_is_an_approval(chat_daemon, xvfb, recorder) -> None:
    daemon, server = chat_daemon(xvfb.display)
    mark = recorder.mark()
    decided: list[dict[str, Any]] = []
    approved = run_approving(daemon, "chat-ask", decided=decided)
    assert approved["state"] == "succeeded" and approved["final_message"] == "kept it", approved["error"]
    asked = [a for a in decided if _asks_the_user(a)]
    assert len(asked) == 1 and "Which of the two files should I keep?" in asked[0]["checks"][0]["message"]
    assert asked[0]["actions"] == [] and asked[0]["screenshot"]  # the approver sees the screen the model saw
    seen = _image_size(server.requests[-1])
    assert presses(recorder.events(mark)) == [(1, *_native(10, 10, seen, (1280, 800)))]
    # Denied, the task ends as a denied approval ends it; the click after the question never runs.
    mark = recorder.mark()
    denied = run_approving(daemon, "chat-ask", deny=_asks_the_user)
    assert denied["state"] == "failed" and denied["error"]["kind"] == "approval", denied
    assert "denied" in denied["error"]["message"]
    assert [e for e in recorder.fenced(mark) if e["type"] == "ButtonPress"] == []


@pytest.mark.parametrize("chat_daemon", GIVING_UP, indirect=True)
def test_a_model_that_gives_up_fails_the_task_and_one_acting_where_the_pointer_is_acts_there(
        chat_daemon, xvfb, recorder) -> None:
    daemon, server = chat_daemon(xvfb.display)
    gave = run_approving(daemon, "chat-gave")
    assert gave["state"] == "failed" and gave["error"]["kind"] == "computer_use", gave
    assert "gave up" in gave["error"]["message"] and "I could not find the file anywhere" in gave["error"]["message"]
    mark = recorder.mark()
    nowhere = run_approving(daemon, "chat-nowhere")
    assert nowhere["state"] == "failed" and "pointer has not been sent anywhere" in nowhere["error"]["message"], nowhere
    assert [e for e in recorder.fenced(mark) if e["type"] == "ButtonPress"] == []
    mark = recorder.mark()
    pointed = run_approving(daemon, "chat-pointed")
    assert pointed["state"] == "succeeded", pointed["error"]
    seen = _image_size(server.requests[-1])
    assert presses(recorder.events(mark)) == [(5, *_native(300, 200, seen, (1280, 800)))] * 3


def test_approval_safety_is_refused_at_submit_for_a_chat_model(chat_daemon, xvfb) -> None:
    daemon, server = chat_daemon(xvfb.display)
    with pytest.raises(CudError) as caught:
        daemon.call("submit", prompt="x", model="chat-work")  # the daemon's default approval: safety
    assert "'safety'" in caught.value.message and "'actions'" in caught.value.message
    assert "'chat-work'" in caught.value.message and "'chat'" in caught.value.message
    assert server.requests == []


def _start_up(tmp_path: Path, config: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "cud.toml"
    path.write_text(config)
    base = {k: v for k, v in os.environ.items() if k != "CUD_TEST_UNSET_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "cud.daemon.main", "run", "--config", str(path), "--display", ":99",
         "--socket", str(tmp_path / "s"), "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**base, **(env or {}), "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x"},
    )


def test_an_unknown_format_and_a_missing_key_stop_the_daemon_at_start_up(tmp_path: Path) -> None:
    unknown = _start_up(tmp_path, '[models.m]\napi = "chat"\nbase_url = "http://127.0.0.1:9/v1"\nformat = "cogagent"\n')
    assert unknown.returncode == 2, unknown.stderr
    assert "'cogagent'" in unknown.stderr and "'ui-tars'" in unknown.stderr and "models.m.format" in unknown.stderr
    missing = _start_up(tmp_path, '[models.m]\napi = "chat"\nbase_url = "http://127.0.0.1:9/v1"\nformat = "ui-tars"\n'
                                  'api_key_env = "CUD_TEST_UNSET_KEY"\n')
    assert missing.returncode == 2, missing.stderr
    assert "CUD_TEST_UNSET_KEY" in missing.stderr and "'m'" in missing.stderr
