"""The OpenCUA chat format, against OpenCUA's own prompt and parser (vendored: tests/support/opencua_reference.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed, OutOfBounds, UnknownKey
from cud.model_api.chat import Turn, format_for, opencua
from cud.model_api.chat.resize import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, smart_resize
from tests.support import chat_formats
from tests.support import opencua_reference as reference
from tests.support.chat_formats import near

screens = st.sampled_from(chat_formats.SCREENS)


def test_the_format_table_names_this_module() -> None:
    assert format_for("opencua") is opencua


def test_the_prompts_are_the_published_ones() -> None:
    assert opencua.SYSTEM_PROMPT == reference.L2_SYSTEM_PROMPTS[0]
    assert opencua.INSTRUCTION == reference.INSTRUTION_TEMPLATE


@settings(max_examples=300, deadline=None)
@given(st.integers(56, 8000), st.integers(56, 8000))
def test_smart_resize_is_the_agents(height: int, width: int) -> None:
    # The agent's copy rounds its minimum-size branch differently (below 3136 pixels, no screen).
    assume(max(height, width) / min(height, width) <= 200)
    ours = smart_resize(height, width, min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)
    assert ours[::-1] == reference.smart_resize_qwen25(width, height)


def _answer(code: str, thought: str = "look", action: str = "act") -> str:
    return f"## Thought:\n{thought}\n\n## Action:\n{action}\n\n## Code:\n```python\n{code}\n```\n"


@settings(max_examples=200, deadline=None)
@given(screens, st.data(), st.sampled_from(["click", "doubleClick", "rightClick", "moveTo"]))
def test_pointer_calls_land_where_the_reference_puts_them(screen: tuple[int, int], data: st.DataObject,
                                                          function: str) -> None:
    width, height = screen
    space = opencua.space(width, height)
    x = data.draw(st.integers(2, space.model_width - 1))
    y = data.draw(st.integers(2, space.model_height - 1))
    code = f"pyautogui.{function}(x={x}, y={y})"
    [action] = opencua.parse(_answer(code), space).actions
    [(kind, (ref_x, ref_y))] = reference.extract_actions(code)
    assert kind == function
    assert action["type"] == {"doubleClick": "double_click", "moveTo": "move"}.get(function, "click")
    if function in ("click", "rightClick"):
        assert action["button"] == ("right" if function == "rightClick" else "left")
    abs_x, abs_y = reference.qwen25_smart_resize_to_absolute(ref_x, ref_y, width, height)
    assert near(action["x"], abs_x, width / space.model_width), (action, abs_x)
    assert near(action["y"], abs_y, height / space.model_height), (action, abs_y)


@settings(max_examples=200, deadline=None)
@given(st.one_of(
    st.builds(lambda t: f"pyautogui.write(message='{t}')",
              st.text(st.characters(blacklist_characters="'\"\\", blacklist_categories=("Cs", "Cc")), min_size=1)),
    st.builds(lambda k: f"pyautogui.hotkey({', '.join(map(repr, k))})",
              st.lists(st.sampled_from(chat_formats.KEYS), min_size=2, max_size=3)),
    st.builds(lambda k: f"pyautogui.press({k!r})", st.sampled_from(chat_formats.KEYS)),
    st.builds(lambda n: f"pyautogui.scroll({n})", st.integers(-20, 20)),
    st.builds(lambda s: f"computer.terminate(status={s!r})", st.sampled_from(["success", "failure"])),
))
def test_keys_text_scrolls_and_the_end_are_the_references(code: str) -> None:
    reply = opencua.parse(_answer(code), opencua.space(1920, 1080))
    [(kind, value)] = reference.extract_actions(code)
    if kind == "terminate":
        assert reply.actions == [] and reply.final == "act" and reply.gave_up == (value == "failure")
        return
    [action] = reply.actions
    if kind == "write":
        assert action == {"type": "type", "text": value}
    elif kind in ("hotkey", "press"):
        assert action == {"type": "keypress", "keys": value}
    else:
        assert action == {"type": "scroll", "scroll_x": 0, "scroll_y": -value * SCROLL_PIXELS_PER_NOTCH}


def test_a_drag_triple_click_and_wait() -> None:
    space = opencua.space(1366, 768)
    code = ("pyautogui.moveTo(x=10, y=20)\npyautogui.dragTo(x=300, y=400, button='left')\n"
            "computer.triple_click(x=5, y=6)\ncomputer.wait()\npyautogui.moveTo(7, 8)")
    reply = opencua.parse(_answer(code), space)
    first, last, triple = space.to_screen(10, 20, "a"), space.to_screen(300, 400, "b"), space.to_screen(5, 6, "c")
    assert reply.actions == [
        {"type": "drag", "path": [{"x": first[0], "y": first[1]}, {"x": last[0], "y": last[1]}]},
        {"type": "double_click", "x": triple[0], "y": triple[1]},
        {"type": "click", "x": triple[0], "y": triple[1], "button": "left"},
        {"type": "wait"},
        {"type": "move", "x": space.to_screen(7, 8, "d")[0], "y": space.to_screen(7, 8, "d")[1]},
    ]
    [(_, point)] = [entry for entry in reference.extract_actions(code) if entry[0] == "dragTo"]
    assert point == (300.0, 400.0)


def test_the_reference_fallback_reads_code_without_a_fence() -> None:
    reply = opencua.parse("## Action:\nclick it\n\npyautogui.click(x=100, y=200)", opencua.space(1920, 1080))
    assert reply.actions == [{"type": "click", "x": 99, "y": 198, "button": "left"}]


steps = [(0, 500), (0, -300), (200, 0), (-100, 0)]


@settings(max_examples=200, deadline=None)
@given(screens, st.lists(chat_formats.actions(scroll_steps=steps), min_size=1, max_size=4),
       st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
       st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30)),
       st.booleans())
def test_parse_gives_back_what_render_wrote(screen: tuple[int, int], actions: list[dict], thought: str,
                                            final: str | None, gave_up: bool) -> None:
    space = opencua.space(*screen)
    texts = [thought, final or "", *(action.get("text", "") for action in actions)]
    # A fence or a heading line inside the text would end the section or the code it stands in.
    assume(not any("`" in text or "#" in text for text in texts))
    assume(final is None or final.strip())
    in_space = [chat_formats.in_space(action, space) for action in actions]
    reply = opencua.parse(opencua.render(in_space, thought=thought, final=final, gave_up=gave_up and final is not None),
                          space)
    assert reply.actions == [chat_formats.native(action, space) for action in in_space]
    assert reply.final == (final.strip() if final is not None else None)
    assert reply.gave_up == (gave_up and final is not None)


@settings(max_examples=100, deadline=None)
@given(screens, st.data())
def test_a_point_off_the_model_screen_is_refused_by_name(screen: tuple[int, int], data: st.DataObject) -> None:
    space = opencua.space(*screen)
    x = data.draw(st.integers(0, space.model_width - 1))
    y = data.draw(st.one_of(st.integers(space.model_height, 10**5), st.integers(-10**5, -1)))
    with pytest.raises(OutOfBounds, match=re.escape(f"({x}, {y})")):
        opencua.parse(_answer(f"pyautogui.click(x={x}, y={y})"), space)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_garbage_is_refused_quoting_it(text: str) -> None:
    assume("```" not in text and "pyautogui." not in text and "computer." not in text)
    with pytest.raises(ComputerUseFailed) as failed:
        opencua.parse(text, opencua.space(1920, 1080))
    assert repr(text) in failed.value.message


@pytest.mark.parametrize("code,match", [
    ("import os\nos.system('rm -rf /')", "unknown function os.system"),
    ("pyautogui.click(x=__import__('os'), y=1)", "no literal"),
    ("x = 1", "no call"),
    ("pyautogui.keyDown('shift')", "held across actions"),
    ("pyautogui.dragTo(x=1, y=2)", "no pyautogui.moveTo before it"),
    ("pyautogui.click(x=1, y=2, clicks=5)", "clicks 5 times"),
    ("pyautogui.press('frobnicate')", "frobnicate"),
    ("computer.terminate(status='maybe')", "status 'maybe'"),
    ("computer.terminate(status='success')\npyautogui.click(x=1, y=2)", "after computer.terminate"),
    ("pyautogui.click(x=1, y=", "not Python"),
])
def test_what_cud_cannot_do_is_refused_with_the_reason(code: str, match: str) -> None:
    with pytest.raises((ComputerUseFailed, UnknownKey), match=match):
        opencua.parse(_answer(code), opencua.space(1920, 1080))


def test_the_request_keeps_the_agents_history() -> None:
    space = opencua.space(1279, 801)
    shot = opencua.image(chat_formats.png(1279, 801), space)
    past = [Turn(shot, _answer("computer.wait()", action=f"step {n}")) for n in range(opencua.HISTORY + 2)]
    messages = opencua.request("rename {x}", past, shot, space)
    assert messages[0] == {"role": "system", "content": opencua.SYSTEM_PROMPT}
    assistant = [m["content"] for m in messages if m["role"] == "assistant"]
    assert assistant == [f"# Step {n + 1}:\n## Action:\nstep {n}\n" for n in range(2, opencua.HISTORY + 2)]
    images = [part for m in messages if m["role"] == "user" for part in m["content"] if part["type"] == "image_url"]
    assert len(images) == opencua.IMAGES + 1
    assert messages[-1]["content"][1]["text"] == reference.INSTRUTION_TEMPLATE.format(instruction="rename {x}")


# pyautogui's KEY_NAMES less the media, browser and input-method keys X has no core keysym for.
PYAUTOGUI_KEYS = (
    "alt altleft altright apps backspace capslock clear ctrl ctrlleft ctrlright del delete down end enter esc escape "
    "execute help home insert left modechange numlock pagedown pageup pause pgdn pgup print printscreen prntscrn "
    "prtsc prtscr return right scrolllock select shift shiftleft shiftright space tab up win winleft winright "
    "command option optionleft optionright add subtract multiply divide decimal separator "
    + " ".join(f"f{n}" for n in range(1, 25)) + " " + " ".join(f"num{n}" for n in range(10))).split()


@pytest.mark.parametrize("key", PYAUTOGUI_KEYS)
def test_pyautogui_key_names_are_keys(key: str) -> None:
    [action] = opencua.parse(_answer(f"pyautogui.press({key!r})"), opencua.space(1920, 1080)).actions
    assert action == {"type": "keypress", "keys": [key]}
