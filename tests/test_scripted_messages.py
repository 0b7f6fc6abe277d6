"""The scripted model over Anthropic's Messages API, through the real anthropic SDK over HTTP."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest
from PIL import Image

from cud.scripted.messages import ScriptedMessages, to_computer_calls
from tests.support.daemon import ROOT
from tests.support.recorder import wait_until

TOOL = {"type": "computer_20250124", "name": "computer", "display_width_px": 1280, "display_height_px": 800}


def _png(width: int, height: int, colour: tuple[int, int, int] = (255, 255, 255)) -> str:
    image = Image.new("RGB", (width, height), colour)
    image.paste((0x33, 0x66, 0xCC), (100, 40, 121, 61))  # a 21x21 target, centre (110, 50)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


def _turn(use_id: str, png: str) -> list[dict[str, object]]:
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": use_id, "name": "computer",
                                               "input": {"action": "screenshot"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}]}]


def test_the_protocols_actions_become_the_computer_tools_calls() -> None:
    assert to_computer_calls([
        {"type": "click", "button": "right", "x": 1, "y": 2, "keys": ["ctrl", "shift"]},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 2, "y": 2}, {"x": 3, "y": 3}]},
        {"type": "scroll", "x": 5, "y": 6, "scroll_x": 0, "scroll_y": -250},
        {"type": "keypress", "keys": ["ctrl", "s"]},
        {"action": "triple_click", "coordinate": [4, 4]},
    ]) == [
        {"action": "right_click", "coordinate": [1, 2], "text": "ctrl+shift"},
        {"action": "left_mouse_down", "coordinate": [1, 1]}, {"action": "mouse_move", "coordinate": [2, 2]},
        {"action": "left_mouse_up", "coordinate": [3, 3]},
        {"action": "scroll", "coordinate": [5, 6], "scroll_direction": "up", "scroll_amount": 3},
        {"action": "key", "text": "ctrl+s"},
        {"action": "triple_click", "coordinate": [4, 4]},
    ]


def test_a_scenario_plays_through_the_sdk_aiming_at_the_image_the_model_saw() -> None:
    scenario = {"name": "t", "steps": [
        {"actions": [{"type": "screenshot"}]},
        {"message": "looking", "actions": [{"type": "click", "button": "left", "target": {"color": "#3366CC"}}]},
        {"message": "done"},
    ]}
    with ScriptedMessages(scenario) as server, anthropic.Anthropic(api_key="any", base_url=server.base_url,
                                                                    max_retries=0) as client:
        prompt = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]
        first = client.beta.messages.create(model="claude-x", max_tokens=100, tools=[TOOL], messages=prompt,
                                            betas=["computer-use-2025-01-24"])
        use = first.content[0]
        assert (use.type, use.input, first.stop_reason) == ("tool_use", {"action": "screenshot"}, "tool_use")
        history = [*prompt, *_turn(use.id, _png(1280, 800))]
        second = client.beta.messages.create(model="claude-x", max_tokens=100, tools=[TOOL], messages=history,
                                             betas=["computer-use-2025-01-24"])
        assert second.content[0].text == "looking"
        assert second.content[1].input == {"action": "left_click", "coordinate": [110, 50]}
        # A tool_use left unanswered is the API's 400, as is an image the API would scale.
        with pytest.raises(anthropic.BadRequestError, match="without tool_result"):
            client.beta.messages.create(model="claude-x", max_tokens=100, tools=[TOOL],
                                        messages=[*prompt, history[1], {"role": "user", "content": "?"}])
        with pytest.raises(anthropic.BadRequestError, match="1920x1080"):
            client.beta.messages.create(model="claude-x", max_tokens=100, tools=[TOOL],
                                        messages=[*prompt, *_turn(use.id, _png(1920, 1080))])


def test_the_command_line_serves_the_messages_api(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"name": "s", "steps": [{"message": "hello from the script"}]}))
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "cud.scripted", "--api", "messages", "--scenario", str(scenario),
                             "--port-file", str(port_file), "-q"], cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        wait_until(port_file.exists, 60, "the scripted server's port file")
        with anthropic.Anthropic(api_key="any", base_url=f"http://127.0.0.1:{port_file.read_text().strip()}") as client:
            answer = client.beta.messages.create(model="m", max_tokens=10, tools=[TOOL],
                                                 messages=[{"role": "user", "content": "hi"}])
        assert [b.text for b in answer.content] == ["hello from the script"] and answer.stop_reason == "end_turn"
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
