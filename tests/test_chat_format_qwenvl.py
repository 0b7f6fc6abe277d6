"""The Qwen2.5-VL chat format, against Qwen's own tool and resize (vendored: tests/support/qwen_reference.py)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed, OutOfBounds, UnknownKey
from cud.model_api.chat import Turn, format_for, qwenvl
from cud.model_api.chat.resize import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, smart_resize
from tests.support import chat_formats
from tests.support import qwen_reference as reference

screens = st.sampled_from(chat_formats.SCREENS)


def test_the_format_table_names_this_module() -> None:
    assert format_for("qwen-vl") is qwenvl


def test_the_tool_is_the_cookbooks_at_the_smart_resized_size() -> None:
    space = qwenvl.space(1920, 1080)
    tool = reference.ComputerUse({"display_width_px": space.model_width, "display_height_px": space.model_height})
    prompt = qwenvl.system_prompt(space)
    declared = json.loads(prompt.split("<tools>\n")[1].split("\n</tools>")[0])["function"]
    assert declared["name"] == "computer_use"
    assert declared["description"] == tool.description
    assert declared["parameters"] == tool.parameters
    assert "The screen's resolution is 1932x1092." in declared["description"]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8000), st.integers(1, 8000))
def test_smart_resize_is_qwens(height: int, width: int) -> None:
    assume(max(height, width) / min(height, width) <= 200)
    ours = smart_resize(height, width, min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)
    assert ours == reference.smart_resize(height, width)


def _call(arguments: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": "computer_use", "arguments": arguments}) + "\n</tool_call>"


@settings(max_examples=200, deadline=None)
@given(screens, st.data(), st.sampled_from(["left_click", "right_click", "middle_click", "double_click", "mouse_move"]))
def test_the_cookbooks_reading_and_cuds_agree(screen: tuple[int, int], data: st.DataObject, action: str) -> None:
    width, height = screen
    space = qwenvl.space(width, height)
    x = data.draw(st.integers(0, space.model_width - 1))
    y = data.draw(st.integers(0, space.model_height - 1))
    text = "I click it.\n" + _call({"action": action, "coordinate": [x, y]})
    theirs = reference.parse_tool_call(text)
    [ours] = qwenvl.parse(text, space).actions
    # The cookbook draws the coordinate on the smart-resized image: cud acts on the native pixel under it.
    assert (ours["x"], ours["y"]) == space.to_screen(*theirs["arguments"]["coordinate"], "cookbook")
    assert ours["type"] == {"double_click": "double_click", "mouse_move": "move"}.get(action, "click")
    if ours["type"] == "click":
        assert ours["button"] == {"left_click": "left", "right_click": "right", "middle_click": "wheel"}[action]


def test_a_known_point_and_the_pointers_actions() -> None:
    space = qwenvl.space(1920, 1080)  # 1932 x 1092
    reply = qwenvl.parse(_call({"action": "left_click", "coordinate": [1931, 1091]}), space)
    assert reply.actions == [{"type": "click", "button": "left", "x": 1919, "y": 1079}]
    reply = qwenvl.parse(_call({"action": "left_click"}) + _call({"action": "scroll", "pixels": -3})
                         + _call({"action": "left_click_drag", "coordinate": [100, 200]}), space)
    end = space.to_screen(100, 200, "end")
    assert reply.actions == [{"type": "click", "button": "left"},
                             {"type": "scroll", "scroll_x": 0, "scroll_y": 3 * SCROLL_PIXELS_PER_NOTCH},
                             {"type": "drag", "path": [{"x": end[0], "y": end[1]}]}]
    done = qwenvl.parse("Nothing is left to do.\n" + _call({"action": "terminate", "status": "failure"}), space)
    assert (done.actions, done.final, done.gave_up) == ([], "Nothing is left to do.", True)


steps = [(0, 500), (0, -300), (0, 100)]


@settings(max_examples=200, deadline=None)
@given(screens, st.lists(chat_formats.actions(scroll_steps=steps), min_size=1, max_size=4),
       st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), st.booleans(), st.booleans())
def test_parse_gives_back_what_render_wrote(screen: tuple[int, int], actions: list[dict], thought: str,
                                            ends: bool, gave_up: bool) -> None:
    space = qwenvl.space(*screen)
    assume("<tool_call>" not in thought and "</tool_call>" not in thought)
    in_space = [chat_formats.in_space(action, space) for action in actions]
    final = thought if ends and thought.strip() else None
    text = qwenvl.render(in_space, thought=thought, final=final, gave_up=gave_up and final is not None)
    reply = qwenvl.parse(text, space)
    assert reply.actions == [chat_formats.native(action, space) for action in in_space]
    assert reply.thought == (thought.strip() or None)
    assert reply.final == (final.strip() if final is not None else None)
    assert reply.gave_up == (gave_up and final is not None)


@settings(max_examples=100, deadline=None)
@given(screens, st.data())
def test_a_point_off_the_model_screen_is_refused_by_name(screen: tuple[int, int], data: st.DataObject) -> None:
    space = qwenvl.space(*screen)
    x = data.draw(st.one_of(st.integers(space.model_width, 10**5), st.integers(-10**5, -1)))
    y = data.draw(st.integers(0, space.model_height - 1))
    with pytest.raises(OutOfBounds, match=re.escape(f"({x}, {y})")):
        qwenvl.parse(_call({"action": "left_click", "coordinate": [x, y]}), space)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_garbage_is_refused_quoting_it(text: str) -> None:
    assume("<tool_call>" not in text)
    with pytest.raises(ComputerUseFailed) as failed:
        qwenvl.parse(text, qwenvl.space(1920, 1080))
    assert repr(text) in failed.value.message


@pytest.mark.parametrize("answer,match", [
    ("<tool_call>\n{not json}\n</tool_call>", "not JSON"),
    ('<tool_call>\n{"name": "shell", "arguments": {"cmd": "ls"}}\n</tool_call>', "no computer_use call"),
    (_call({"action": "hold_key", "text": "shift"}), "'hold_key'"),
    (_call({"action": "key", "keys": "ctrl+c"}), "no list of names"),
    (_call({"action": "key", "keys": ["ctrl", "frobnicate"]}), "frobnicate"),
    (_call({"action": "terminate", "status": "maybe"}), "status 'maybe'"),
    (_call({"action": "terminate", "status": "success"}) + _call({"action": "wait", "time": 1}), "after terminate"),
    (_call({"action": "left_click", "coordinate": [1, 2, 3]}), "no \\[x, y\\]"),
    (_call({"action": "scroll", "pixels": 2.5}), "no whole number"),
])
def test_what_cud_cannot_do_is_refused_with_the_reason(answer: str, match: str) -> None:
    with pytest.raises((ComputerUseFailed, UnknownKey), match=match):
        qwenvl.parse(answer, qwenvl.space(1920, 1080))


def test_the_request_carries_the_tool_the_history_and_the_smart_resized_screenshot() -> None:
    space = qwenvl.space(1366, 768)
    shot = qwenvl.image(chat_formats.png(1366, 768), space)
    past = [Turn(shot, f"step {n}" + _call({"action": "wait", "time": 1})) for n in range(qwenvl.HISTORY + 2)]
    messages = qwenvl.request("find {x}", past, shot, space)
    assert messages[0] == {"role": "system", "content": qwenvl.system_prompt(space)}
    assert messages[1]["content"][0]["text"] == "find {x}"
    assert [m["content"] for m in messages if m["role"] == "assistant"] == [t.text for t in past[-qwenvl.HISTORY:]]
    assert messages[-1]["content"][0]["type"] == "image_url"
