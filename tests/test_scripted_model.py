"""The scripted model, driven by the real openai SDK over loopback HTTP.

The driver here is a test double for the *display* only: it paints a PNG and
records the actions the SDK hands it. Real display drivers are tested elsewhere.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from openai.lib.computer import ComputerToolset
from PIL import Image, ImageDraw

from cud.errors import ConfigError
from cud.scripted import ScriptedModel, load_scenario, parse_scenario

BLUE = "#3366CC"
RECT = (100, 50, 139, 89)  # inclusive corners: 40x40 pixels centred on (119.5, 69.5)
PARAMS: dict[str, Any] = {"model": "scripted-test", "input": "do the thing", "tools": [{"type": "computer"}]}


class PaintedScreen:
    """Returns a 320x200 PNG with a blue rectangle; records every action as a dict."""

    def __init__(self, *, file_id: bool = False) -> None:
        self.actions: list[dict[str, Any]] = []
        self.file_id = file_id
        image = Image.new("RGB", (320, 200), "#EEEEEE")
        ImageDraw.Draw(image).rectangle(RECT, fill=BLUE)
        buffer = io.BytesIO()
        image.save(buffer, "PNG")
        self.url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")

    def _record(self, action: Any) -> None:
        self.actions.append(action.to_dict())

    click = double_click = drag = keypress = move = scroll = type = wait = _record

    def screenshot(self) -> dict[str, str]:
        if self.file_id:
            return {"type": "computer_screenshot", "file_id": "file_123"}
        return {"type": "computer_screenshot", "image_url": self.url}


def run(model: ScriptedModel, screen: PaintedScreen, **kwargs: Any) -> Any:
    with openai.OpenAI(base_url=model.base_url, api_key="test-key", max_retries=kwargs.pop("max_retries", 2)) as client:
        return ComputerToolset(screen).run(client, PARAMS, **kwargs)


def post(model: ScriptedModel, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", model.port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


ALL_ACTIONS = [
    {"type": "click", "button": "right", "x": 10, "y": 20},
    {"type": "double_click", "x": 11, "y": 21},
    {"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 30, "y": 40}]},
    {"type": "keypress", "keys": ["CTRL", "A"]},
    {"type": "move", "x": 5000, "y": -3},  # off-screen on purpose: passed through verbatim
    {"type": "scroll", "x": 7, "y": 8, "scroll_x": 0, "scroll_y": -3},
    {"type": "type", "text": "Hello from cud — ✓ ü €"},
    {"type": "wait"},
]


def test_a_multi_step_scenario_runs_to_its_final_message_with_exact_actions() -> None:
    scenario = {
        "name": "all",
        "steps": [
            {"actions": [{"type": "screenshot"}]},
            {"actions": ALL_ACTIONS[:4], "message": "working on it", "delay": 0.01},
            {"actions": ALL_ACTIONS[4:]},
            {"message": "all done ✓"},
        ],
    }
    screen = PaintedScreen()
    with ScriptedModel(scenario) as model:
        response = run(model, screen)
        requests = model.requests
    assert response.output_text == "all done ✓"
    assert screen.actions == ALL_ACTIONS
    assert [sum(i.get("type") == "computer_call_output" for i in r["input"]) for r in requests] == [0, 1, 2, 3]
    commentary = [i for i in requests[2]["input"] if i.get("type") == "message" and i.get("role") == "assistant"]
    assert [(m["phase"], m["content"][0]["text"]) for m in commentary] == [("commentary", "working on it")]
    ids = [item["id"] for item in requests[-1]["input"] if "id" in item] + [item.id for item in response.output]
    assert len(ids) == len(set(ids)) == 5  # 3 calls, the commentary and the final message
    call_ids = [item["call_id"] for item in requests[-1]["input"] if item.get("type") == "computer_call"]
    assert len(set(call_ids)) == 3


def test_request_bytes_are_the_bodies_as_the_client_sent_them_even_unrecorded() -> None:
    sent: list[int] = []  # the client's own count, from httpx2's request hook
    steps = [{"actions": [{"type": "screenshot"}]}, {"actions": [{"type": "wait"}]}, {"message": "done"}]
    with ScriptedModel({"name": "bytes", "steps": steps}, record=False) as model:
        http = httpx2.Client(event_hooks={"request": [lambda request: sent.append(len(request.read()))]})
        with openai.OpenAI(base_url=model.base_url, api_key="k", http_client=http) as client:
            ComputerToolset(PaintedScreen()).run(client, PARAMS)
        broken = b"{not json at all"
        assert post(model, "/v1/responses", broken)[0] == 401  # refused, still received
        assert post(model, "/v1/other", b"{}")[0] == 404  # not a Responses body: not counted
        counted = model.request_bytes
        assert model.requests == []
    assert counted == [*sent, len(broken)] and len(sent) == 3
    # The loop replays the whole history, so each turn's body adds at least the newest screenshot.
    shot = len(PaintedScreen().url)
    assert counted[1] - counted[0] > shot and counted[2] - counted[1] > shot


def test_answer_seconds_hold_the_latency_of_each_answer_and_nothing_for_a_refused_request() -> None:
    steps = [{"actions": [{"type": "screenshot"}]}, {"message": "done"}]
    with ScriptedModel({"name": "slow", "steps": steps}, record=False, latency=0.25) as model:
        with openai.OpenAI(base_url=model.base_url, api_key="k") as client:
            ComputerToolset(PaintedScreen()).run(client, PARAMS)
        assert post(model, "/v1/responses", b"{not json")[0] == 401
        answered = model.answer_seconds
    assert len(answered) == 2 and min(answered) >= 0.25  # each held back by the latency: no upper bound


def test_safety_checks_reach_the_approver_and_come_back_acknowledged() -> None:
    scenario = {
        "name": "checks",
        "steps": [
            {
                "actions": [{"type": "wait"}],
                "safety_checks": [
                    {"code": "sensitive", "message": "sure?"},
                    {"id": "sc_fixed", "code": "c2", "message": "m2"},
                ],
            },
            {"message": "ok"},
        ],
    }
    seen: list[list[dict[str, Any]]] = []

    def approve(call: Any) -> bool:
        seen.append([check.to_dict() for check in call.pending_safety_checks])
        return True

    with ScriptedModel(scenario) as model:
        assert run(model, PaintedScreen(), approve_safety_checks=approve).output_text == "ok"
        requests = model.requests
    assert len(seen) == 1
    assert [(c["code"], c["message"]) for c in seen[0]] == [("sensitive", "sure?"), ("c2", "m2")]
    assert seen[0][0]["id"].startswith("cu_sc_") and seen[0][1]["id"] == "sc_fixed"
    (output,) = [i for i in requests[1]["input"] if i.get("type") == "computer_call_output"]
    assert output["acknowledged_safety_checks"] == seen[0]


def test_a_colour_target_hits_the_centre_of_the_drawn_rectangle() -> None:
    target = {"color": BLUE.lower()}
    scenario = {
        "name": "aim",
        "steps": [
            {"actions": [{"type": "screenshot"}]},
            {
                "expect_screenshot": True,
                "actions": [
                    {"type": "click", "button": "left", "target": target},
                    {"type": "drag", "path": [{"x": 0, "y": 0}, {"target": target}]},
                    {"type": "scroll", "target": target, "scroll_x": 0, "scroll_y": 2},
                ],
            },
            {"message": "hit"},
        ],
    }
    screen = PaintedScreen()
    with ScriptedModel(scenario) as model:
        assert run(model, screen).output_text == "hit"
    assert screen.actions == [
        {"type": "click", "button": "left", "x": 119, "y": 69},
        {"type": "drag", "path": [{"x": 0, "y": 0}, {"x": 119, "y": 69}]},
        {"type": "scroll", "scroll_x": 0, "scroll_y": 2, "x": 119, "y": 69},
    ]


class LateScreen(PaintedScreen):
    """The blue rectangle shows from the ``late``-th screenshot on (an application still starting before)."""

    def __init__(self, late: int) -> None:
        super().__init__()
        self.late, self.taken = late, 0
        blank = io.BytesIO()
        Image.new("RGB", (320, 200), "#EEEEEE").save(blank, "PNG")
        self.blank = "data:image/png;base64," + base64.b64encode(blank.getvalue()).decode("ascii")

    def screenshot(self) -> dict[str, str]:
        self.taken += 1
        return {"type": "computer_screenshot", "image_url": self.url if self.taken >= self.late else self.blank}


def until_blue(looks: int) -> dict[str, Any]:
    return {"name": "until", "steps": [
        {"actions": [{"type": "screenshot"}]},
        {"until": {"color": BLUE, "looks": looks}, "actions": [{"type": "click", "button": "left", "target": {"color": BLUE}}]},
        {"actions": [{"type": "keypress", "keys": ["ENTER"]}]},
        {"message": "hit"}]}


@pytest.mark.parametrize("late", [1, 2, 4])
def test_a_step_that_waits_for_a_colour_answers_waits_until_it_shows_then_its_actions(late: int) -> None:
    screen = LateScreen(late)
    with ScriptedModel(until_blue(looks=3)) as model:
        assert run(model, screen).output_text == "hit"
    assert screen.actions == [*[{"type": "wait"}] * (late - 1), {"type": "click", "button": "left", "x": 119, "y": 69},
                              {"type": "keypress", "keys": ["ENTER"]}]


def test_a_colour_that_never_shows_ends_the_wait_with_a_400_naming_it() -> None:
    screen = LateScreen(late=10)
    with ScriptedModel(until_blue(looks=2)) as model:
        with pytest.raises(openai.BadRequestError, match=f"step 1: colour {BLUE} did not show in 2 screenshots"):
            run(model, screen)
    assert screen.actions == [{"type": "wait"}] * 2


@pytest.mark.parametrize(
    ("steps", "screen", "expected"),
    [
        ([{"actions": [{"type": "wait"}]}, {"actions": [{"type": "move", "target": {"color": "#00FF00"}}]}],
         PaintedScreen(), "colour #00FF00 is not on the 320x200 screenshot"),
        ([{"actions": [{"type": "move", "target": {"color": BLUE}}]}],
         PaintedScreen(), "request carries no screenshot"),
        ([{"actions": [{"type": "wait"}]}, {"expect_screenshot": True, "actions": [{"type": "wait"}]}],
         PaintedScreen(file_id=True), "last screenshot has no image_url"),
    ],
)
def test_aiming_without_a_usable_screenshot_is_a_400_naming_the_problem(
    steps: list[Any], screen: PaintedScreen, expected: str
) -> None:
    with ScriptedModel({"name": "miss", "steps": steps}) as model:
        with pytest.raises(openai.BadRequestError, match=expected):
            run(model, screen)


def test_http_errors_surface_as_openai_errors_and_transient_ones_are_retried_through() -> None:
    body = {"error": {"message": "you asked for it", "type": "invalid_request_error", "param": None, "code": "nope"}}
    with ScriptedModel({"name": "e400", "steps": [{"http_error": 400, "body": body}]}) as model:
        with pytest.raises(openai.BadRequestError, match="you asked for it") as caught:
            run(model, PaintedScreen())
        assert caught.value.code == "nope" and len(model.requests) == 1
    with ScriptedModel({"name": "e500", "steps": [{"http_error": 503}]}) as model:
        with pytest.raises(openai.InternalServerError, match="scripted HTTP 503 at step 0"):
            run(model, PaintedScreen(), max_retries=0)
    flaky = {
        "name": "flaky",
        "steps": [
            {"actions": [{"type": "wait"}]},
            {"http_error": 500, "times": 2, "headers": {"retry-after-ms": "1"}},
            {"message": "recovered"},
        ],
    }
    with ScriptedModel(flaky) as model:
        assert run(model, PaintedScreen(), max_retries=2).output_text == "recovered"
        assert len(model.requests) == 4  # turn 0, then turn 1 three times


def test_two_runs_in_sequence_both_start_at_step_zero() -> None:
    scenario = {"name": "twice", "steps": [{"actions": [{"type": "type", "text": "x"}]}, {"message": "end"}]}
    first, second = PaintedScreen(), PaintedScreen()
    with ScriptedModel(scenario) as model:
        assert run(model, first).output_text == "end"
        assert run(model, second).output_text == "end"
        assert len(model.requests) == 4
    assert first.actions == second.actions == [{"type": "type", "text": "x"}]


def test_a_model_named_scripted_name_plays_that_scenario_and_runs_interleave(tmp_path: Path) -> None:
    named = {"typer": {"name": "typer", "steps": [{"actions": [{"type": "type", "text": "t"}]}, {"message": "typed"}]},
             "waiter": {"name": "waiter", "steps": [{"actions": [{"type": "wait"}]}, {"actions": [{"type": "wait"}]},
                                                    {"message": "waited"}]}}
    for name, scenario in named.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(scenario))
    from cud.scripted import scenario_folder

    typer, waiter, plain = PaintedScreen(), PaintedScreen(), PaintedScreen()
    with ScriptedModel({"name": "default", "steps": [{"message": "default"}]},
                       scenarios=scenario_folder(tmp_path)) as model:
        with openai.OpenAI(base_url=model.base_url, api_key="k") as client:
            # Two runs, turn by turn interleaved: each request's model picks its scenario.
            ask = [{"role": "user", "content": "do the thing"}]
            first = client.responses.create(**{**PARAMS, "input": ask, "model": "scripted:typer"})
            second = client.responses.create(**{**PARAMS, "input": ask, "model": "scripted:waiter"})
            assert [a.type for a in first.output[0].actions] == ["type"]
            assert [a.type for a in second.output[0].actions] == ["wait"]
            assert ComputerToolset(typer).run(client, {**PARAMS, "model": "scripted:typer"}).output_text == "typed"
            assert ComputerToolset(waiter).run(client, {**PARAMS, "model": "scripted:waiter"}).output_text == "waited"
            assert ComputerToolset(plain).run(client, PARAMS).output_text == "default"
            with pytest.raises(openai.BadRequestError, match="has no scenario 'nope' \\(it has: typer, waiter\\)"):
                ComputerToolset(PaintedScreen()).run(client, {**PARAMS, "model": "scripted:nope"})
    assert typer.actions == [{"type": "type", "text": "t"}] and waiter.actions == [{"type": "wait"}] * 2


def test_a_request_past_the_script_is_a_400() -> None:
    with ScriptedModel({"name": "short", "steps": [{"actions": [{"type": "wait"}]}]}) as model:
        with pytest.raises(openai.BadRequestError, match="turn 1 is past its end"):
            run(model, PaintedScreen())


def test_requests_are_checked_like_the_real_api_would(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="cud.scripted")
    good = {"model": "m", "tools": [{"type": "computer"}], "input": []}
    auth = {"Authorization": "Bearer sk-never-logged", "Content-Type": "application/json"}
    unacknowledged = {
        **good,
        "input": [
            {"type": "computer_call", "call_id": "c1", "pending_safety_checks": [{"id": "s1"}]},
            {"type": "computer_call_output", "call_id": "c1", "output": {}, "acknowledged_safety_checks": []},
        ],
    }
    cases = [
        ("/v1/responses", good, {}, 401, "Authorization"),
        ("/v1/nothing", good, auth, 404, "/v1/nothing"),
        ("/v1/responses", b"{not json", auth, 400, "could not parse the JSON"),
        ("/v1/responses", {**good, "model": ""}, auth, 400, "'model'"),
        ("/v1/responses", {**good, "tools": [{"type": "function"}]}, auth, 400, "'function'"),
        ("/v1/responses", {**good, "input": "text"}, auth, 400, "input must be a list"),
        ("/v1/responses", {**good, "input": [{"type": "computer_call_output", "call_id": "zz"}]}, auth, 400, "'zz'"),
        ("/v1/responses", unacknowledged, auth, 400, "'s1' was not acknowledged"),
        ("/v1/responses", good, auth, 200, None),
    ]
    with ScriptedModel({"name": "v", "steps": [{"message": "hi"}]}) as model:
        for path, body, headers, status, text in cases:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            got_status, answer = post(model, path, raw, headers)
            assert got_status == status, (path, body, answer)
            if text is not None:
                assert text in answer["error"]["message"]
        assert len(model.requests) == 6  # every body that parsed and carried a key
    assert caplog.records and "sk-never-logged" not in caplog.text


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ([], "top level [] must be an object"),
        ({"name": "x", "steps": []}, "steps [] must be a non-empty list"),
        ({"name": "x", "steps": [{"say": "hi"}]}, "step 0: step {'say': 'hi'} has none of"),
        ({"name": "x", "steps": [{"message": "a", "colour": 1}]}, "step 0: colour 1 is not allowed"),
        ({"name": "x", "steps": [{"http_error": 200}]}, "step 0: http_error 200 must be an HTTP error status"),
        ({"name": "x", "steps": [{"message": "a", "delay": -1}]}, "delay -1 must be a number of seconds"),
        ({"name": "x", "steps": [{"actions": "click"}]}, "actions 'click' must be a list"),
        ({"name": "x", "steps": [{"actions": [{"type": "move", "target": {"color": "blue"}}]}]},
         "step 0: actions[0].target.color 'blue' must be a colour written #RRGGBB"),
        ({"name": "x", "steps": [{"actions": [{"type": "type", "target": {"color": BLUE}}]}]},
         "actions[0].type 'type' cannot have a target"),
        ({"name": "x", "steps": [{"actions": [], "safety_checks": [{"code": 3, "message": "m"}]}]},
         "safety_checks[0].code 3 must be a string"),
        ({"name": "x", "steps": [{"message": "a"}, {"http_error": 500, "times": 1}]},
         "step 1: times 1 needs a later step"),
        ({"name": "x", "steps": [{"actions": [], "until": {"color": BLUE}}]}, "step 0: until {'color': '#3366CC'} must be"),
        ({"name": "x", "steps": [{"actions": [], "until": {"color": "blue", "looks": 1}}]}, "must name a colour"),
        ({"name": "x", "steps": [{"actions": [], "until": {"color": BLUE, "looks": 0}}]}, "integer >= 1 of looks"),
        ({"name": "x", "steps": [{"message": "a", "until": {"color": BLUE, "looks": 1}}]}, "until"),
    ],
)
def test_bad_scenarios_name_the_bad_value(scenario: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("(", r"\(").replace("{", r"\{")):
        parse_scenario(scenario, source="t.json")


def test_bad_scenario_files_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"name": "x",\n "steps": [}', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken.json: not valid JSON: .* line 2"):
        load_scenario(broken)
    with pytest.raises(ConfigError, match=r"no scenario file or bundled scenario named 'nosuch' \(bundled: demo\)"):
        load_scenario("nosuch")


def wait_for_file(path: Path, process: subprocess.Popen[str]) -> str:
    delay = 0.01
    for _ in range(60):
        if path.exists():
            return path.read_text()
        assert process.poll() is None, process.communicate()
        time.sleep(delay)
        delay = min(delay * 2, 0.5)
    raise AssertionError(f"{path} never appeared")


def test_the_cli_serves_the_bundled_demo_until_sigterm(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    command = [sys.executable, "-m", "cud.scripted", "--scenario", "demo", "--port-file", str(port_file), "-q"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = int(wait_for_file(port_file, process))
        screen = PaintedScreen()
        approvals: list[Any] = []

        def approve(call: Any) -> bool:
            approvals.append(call)
            return True

        with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k") as client:
            response = ComputerToolset(screen).run(client, PARAMS, approve_safety_checks=approve)
        assert len(approvals) == 1
        assert screen.actions == [
            {"type": "click", "button": "left", "x": 119, "y": 69},
            {"type": "type", "text": "Hello from cud — ✓ ü €"},
            {"type": "keypress", "keys": ["ENTER"]},
        ]
        assert "Hello from cud — ✓ ü €" in response.output_text
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out == f"http://127.0.0.1:{port}/v1\n"


def test_the_cli_refuses_a_bad_scenario(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "b", "steps": [{"http_error": 99}]}))
    result = subprocess.run(
        [sys.executable, "-m", "cud.scripted", "--scenario", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "http_error 99 must be an HTTP error status" in result.stderr and os.fspath(bad) in result.stderr
