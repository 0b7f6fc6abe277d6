"""The UI-TARS chat format, against UI-TARS's own published parser (PyPI ``ui-tars``)."""

from __future__ import annotations

import base64
import io
import math
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image
from ui_tars import action_parser as reference

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed, OutOfBounds, UnknownKey
from cud.model_api.chat import Turn, format_for, uitars
from cud.model_api.chat.resize import smart_resize
from tests.support import chat_formats
from tests.support.chat_formats import near

screens = st.sampled_from(chat_formats.SCREENS)
KEYS = chat_formats.KEYS


def test_the_format_table_names_this_module() -> None:
    assert format_for("ui-tars") is uitars
    assert uitars.NAME == "ui-tars"


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 8000), st.integers(1, 8000))
def test_smart_resize_is_the_reference(height: int, width: int) -> None:
    assume(max(height, width) / min(height, width) <= 200)
    ours = smart_resize(height, width, min_pixels=uitars.MIN_PIXELS, max_pixels=uitars.MAX_PIXELS)
    assert ours == reference.smart_resize(height, width)


def test_space_is_the_smart_resized_screen() -> None:
    space = uitars.space(1920, 1080)
    assert (space.model_width, space.model_height) == (1932, 1092)
    assert uitars.space(3840, 2160).model_width * uitars.space(3840, 2160).model_height <= uitars.MAX_PIXELS


def _reference_points(text: str, width: int, height: int) -> list[tuple[str, float, float]]:
    """The reference's pyautogui calls for ``text``: (function, x, y) at native pixels (floats)."""
    # Its callers (OSWorld's agent) take the box tokens out first; its parser does not.
    text = text.replace("<|box_start|>", "").replace("<|box_end|>", "")
    parsed = reference.parse_action_to_structure_output(
        text, factor=1000, origin_resized_height=height, origin_resized_width=width, model_type="qwen25vl")
    code = reference.parsing_response_to_pyautogui_code(parsed, height, width, scale_factor=1)
    return [(name, float(x), float(y))
            for name, x, y in re.findall(r"pyautogui\.(\w+)\((?:-?5, x=)?([-\d.]+),? (?:y=)?([-\d.]+)", code)]


box_forms = st.sampled_from(["start_box='({x},{y})'", "start_box='<|box_start|>({x},{y})<|box_end|>'",
                             "point='<point>{x} {y}</point>'", "start_box='({x},{y},{x2},{y2})'"])


@settings(max_examples=200, deadline=None)
@given(screens, st.data(), st.sampled_from(["click", "left_double", "right_single"]), box_forms)
def test_clicks_land_where_the_reference_puts_them(screen: tuple[int, int], data: st.DataObject, name: str,
                                                    form: str) -> None:
    width, height = screen
    space = uitars.space(width, height)
    x = data.draw(st.integers(0, space.model_width - 1))
    y = data.draw(st.integers(0, space.model_height - 1))
    x2 = data.draw(st.integers(x, space.model_width - 1))
    y2 = data.draw(st.integers(y, space.model_height - 1))
    text = f"Thought: go\nAction: {name}({form.format(x=x, y=y, x2=x2, y2=y2)})"
    reply = uitars.parse(text, space)
    [(function, ref_x, ref_y)] = _reference_points(text, width, height)
    [action] = reply.actions
    assert action["type"] == {"left_double": "double_click"}.get(name, "click")
    assert function == {"left_double": "doubleClick"}.get(name, "click")
    if name != "left_double":
        assert action["button"] == ("right" if name == "right_single" else "left")
    assert near(action["x"], ref_x, width / space.model_width), (action, ref_x)
    assert near(action["y"], ref_y, height / space.model_height), (action, ref_y)
    assert reply.thought == "go"


@settings(max_examples=100, deadline=None)
@given(screens, st.data(), st.sampled_from(["up", "down"]))
def test_scrolls_match_the_reference(screen: tuple[int, int], data: st.DataObject, direction: str) -> None:
    width, height = screen
    space = uitars.space(width, height)
    x = data.draw(st.integers(0, space.model_width - 1))
    y = data.draw(st.integers(0, space.model_height - 1))
    text = f"Thought: more\nAction: scroll(start_box='({x},{y})', direction='{direction}')"
    [action] = uitars.parse(text, space).actions
    [(_, ref_x, ref_y)] = _reference_points(text, width, height)
    code = reference.parsing_response_to_pyautogui_code(reference.parse_action_to_structure_output(
        text, 1000, height, width, model_type="qwen25vl"), height, width, scale_factor=1)
    notches = int(re.search(r"pyautogui\.scroll\((-?\d+)", code).group(1))  # type: ignore[union-attr]
    # pyautogui.scroll: positive is up; the protocol's positive scroll_y is down.
    assert action["scroll_y"] == -notches * SCROLL_PIXELS_PER_NOTCH and action["scroll_x"] == 0
    # The reference writes a scroll's point as the fraction of the screen it parsed (it scales only
    # clicks and drags to the screen).
    assert near(action["x"], ref_x * width, width / space.model_width)
    assert near(action["y"], ref_y * height, height / space.model_height)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60))
def test_typed_text_is_the_reference_content(content: str) -> None:
    # The reference reads the content up to the first "')" and strips leading blanks; within that
    # its reading must be cud's.
    assume("')" not in content and not content[0].isspace() and "\r" not in content and ")\n\n" not in content)
    text = uitars.render([{"type": "type", "text": content}], thought="typing")
    [parsed] = reference.parse_action_to_structure_output(text, 1000, 1080, 1920, model_type="qwen25vl")
    [action] = uitars.parse(text, uitars.space(1920, 1080)).actions
    assert action == {"type": "type", "text": content}
    assert parsed["action_inputs"]["content"] == content


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3))
def test_hotkeys_are_the_reference_keys(keys: list[str]) -> None:
    text = f"Thought: keys\nAction: hotkey(key='{' '.join(keys)}')"
    [parsed] = reference.parse_action_to_structure_output(text, 1000, 1080, 1920, model_type="qwen25vl")
    [action] = uitars.parse(text, uitars.space(1920, 1080)).actions
    assert action == {"type": "keypress", "keys": parsed["action_inputs"]["key"].split()}


def test_drag_and_finished_and_the_reference() -> None:
    space = uitars.space(1366, 768)
    text = "Thought: move it\nAction: drag(start_box='(10,20)', end_box='(300,400)')"
    [action] = uitars.parse(text, space).actions
    code = reference.parsing_response_to_pyautogui_code(
        reference.parse_action_to_structure_output(text, 1000, 768, 1366, model_type="qwen25vl"), 768, 1366,
        scale_factor=1)
    start = [float(v) for v in re.search(r"moveTo\(([\d.]+), ([\d.]+)\)", code).groups()]  # type: ignore[union-attr]
    end = [float(v) for v in re.search(r"dragTo\(([\d.]+), ([\d.]+)", code).groups()]  # type: ignore[union-attr]
    assert action["type"] == "drag"
    [first, last] = action["path"]
    for ours, theirs in ((first, start), (last, end)):
        assert near(ours["x"], theirs[0], 1366 / space.model_width)
        assert near(ours["y"], theirs[1], 768 / space.model_height)
    done = uitars.parse("Thought: all set\nAction: finished(content='It\\'s done')", space)
    assert (done.actions, done.final, done.call_user) == ([], "It's done", None)
    asked = uitars.parse("Thought: which file?\nAction: call_user()", space)
    assert (asked.actions, asked.final, asked.call_user) == ([], None, "which file?")


def test_a_known_point_maps_to_the_pixel_under_its_centre() -> None:
    space = uitars.space(1920, 1080)  # 1932 x 1092
    [action] = uitars.parse("Action: click(start_box='(1931,0)')", space).actions
    assert (action["x"], action["y"]) == (1919, 0)
    [action] = uitars.parse("Action: click(start_box='(10,20,30,41)')", space).actions
    assert (action["x"], action["y"]) == space.to_screen(20, 30, "centre")
    [action] = uitars.parse("Action: click(start_box='(12.9,0.2)')", space).actions
    assert (action["x"], action["y"]) == space.to_screen(12, 0, "floor")


actions_in_space = chat_formats.actions(scroll_steps=[(0, 500), (0, -500), (500, 0), (-500, 0)])


@settings(max_examples=200, deadline=None)
@given(screens, st.lists(actions_in_space, min_size=1, max_size=4), st.text(max_size=30),
       st.one_of(st.none(), st.text(max_size=30)))
def test_parse_gives_back_what_render_wrote(screen: tuple[int, int], actions: list[dict], thought: str,
                                            final: str | None) -> None:
    space = uitars.space(*screen)
    assume(not any("Action:" in a.get("text", "") for a in actions) and "Action:" not in thought)
    assume(final is None or "Action:" not in final)
    in_space = [chat_formats.in_space(action, space) for action in actions]
    reply = uitars.parse(uitars.render(in_space, thought=thought, final=final), space)
    assert reply.actions == [chat_formats.native(action, space) for action in in_space]
    assert reply.final == final
    assert reply.thought == (thought.strip() or None)


@settings(max_examples=100, deadline=None)
@given(screens, st.data())
def test_a_point_off_the_model_screen_is_refused_by_name(screen: tuple[int, int], data: st.DataObject) -> None:
    space = uitars.space(*screen)
    x = data.draw(st.one_of(st.integers(space.model_width, 10**5), st.integers(-10**5, -1)))
    y = data.draw(st.integers(0, space.model_height - 1))
    with pytest.raises(OutOfBounds, match=re.escape(f"({x}, {y})")):
        uitars.parse(f"Thought: t\nAction: click(start_box='({x},{y})')", space)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_garbage_is_refused_quoting_it(text: str) -> None:
    assume("Action:" not in text)
    with pytest.raises(ComputerUseFailed) as failed:
        uitars.parse(text, uitars.space(1920, 1080))
    assert repr(text) in failed.value.message


@pytest.mark.parametrize("answer,match", [
    ("Thought: t\nAction: keydown(key='shift')", "held across steps"),
    ("Thought: t\nAction: long_press(point='<point>1 2</point>')", "mobile"),
    ("Thought: t\nAction: explode()", "unknown action 'explode'"),
    ("Thought: t\nAction: click(start_box=__import__('os'))", "not a plain string"),
    ("Thought: t\nAction: scroll(start_box='(1,2)', direction='sideways')", "no direction"),
    ("Thought: t\nAction: click(start_box='(1,2,3)')", None),
    ("Thought: t\nAction: hotkey(key='ctrl frobnicate')", "frobnicate"),
    ("Thought: t\nAction: finished()\n\nclick(start_box='(1,2)')", "after the one that ends"),
])
def test_what_cud_cannot_do_is_refused_with_the_reason(answer: str, match: str | None) -> None:
    with pytest.raises((ComputerUseFailed, OutOfBounds, UnknownKey), match=match):
        uitars.parse(answer, uitars.space(1920, 1080))


def test_the_request_carries_the_prompt_the_history_and_the_smart_resized_screenshot() -> None:
    space = uitars.space(1279, 801)
    shot = uitars.image(chat_formats.png(1279, 801), space)
    with Image.open(io.BytesIO(shot)) as sent:
        assert sent.size == (space.model_width, space.model_height)
    past = [Turn(shot, f"Thought: {n}\nAction: wait()") for n in range(uitars.HISTORY + 3)]
    messages = uitars.request("open {the} file", past, shot, space)
    assert "open {the} file" in messages[0]["content"][0]["text"] and "Use English" in messages[0]["content"][0]["text"]
    assistant = [m["content"] for m in messages if m["role"] == "assistant"]
    assert assistant == [t.text for t in past[-uitars.HISTORY:]]
    url = messages[-1]["content"][0]["image_url"]["url"]
    assert messages[-1]["role"] == "user" and base64.b64decode(url.removeprefix("data:image/png;base64,")) == shot
    assert math.isclose(len([m for m in messages if m["role"] == "user"]), uitars.HISTORY + 2)


def test_the_prompt_is_the_published_one() -> None:
    from ui_tars.prompt import COMPUTER_USE_DOUBAO

    assert uitars.PROMPT == COMPUTER_USE_DOUBAO
