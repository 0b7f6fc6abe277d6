"""The shared validation step and key table, without a display."""

from __future__ import annotations

import pytest
from openai.types.responses import computer_action as modern
from openai.types.responses import response_computer_tool_call as legacy
from Xlib import XK

from cud.drivers import actions as A
from cud.drivers.keys import keysym_for_char, keysym_for_name
from cud.errors import ActionRejected, OutOfBounds, UnknownKey

SIZE = (1280, 800)


@pytest.mark.parametrize(
    ("name", "keysym"),
    [
        ("ENTER", "Return"), ("enter", "Return"), ("Return", "Return"), ("ESC", "Escape"), ("CTRL", "Control_L"),
        ("ALT", "Alt_L"), ("OPTION", "Alt_L"), ("SHIFT", "Shift_L"), ("CMD", "Super_L"), ("WIN", "Super_L"),
        ("SUPER", "Super_L"), ("META", "Super_L"), ("ArrowLeft", "Left"), ("ARROWDOWN", "Down"),
        ("PageUp", "Prior"), ("PAGEDOWN", "Next"), ("Page_Up", "Prior"), ("Home", "Home"), ("End", "End"),
        ("Insert", "Insert"), ("Delete", "Delete"), ("Backspace", "BackSpace"), ("Tab", "Tab"),
        ("Space", "space"), ("CapsLock", "Caps_Lock"), ("F1", "F1"), ("f24", "F24"), ("KP_Enter", "KP_Enter"),
        ("kp_enter", "KP_Enter"), ("a", "a"), ("A", "a"), ("+", "plus"), ("/", "slash"),
    ],
)
def test_key_names_resolve_case_insensitively(name: str, keysym: str) -> None:
    assert keysym_for_name(name) == XK.string_to_keysym(keysym)


@pytest.mark.parametrize("name", ["FOO", "", "Ctrl+A", "F36"])
def test_unknown_key_names_are_named_in_the_error(name: str) -> None:
    with pytest.raises(UnknownKey) as info:
        keysym_for_name(name)
    assert repr(name) in str(info.value)


def test_characters_map_to_latin1_or_unicode_keysyms() -> None:
    assert keysym_for_char("ü") == 0xFC
    assert keysym_for_char("—") == 0x01002014
    assert keysym_for_char("日") == 0x010065E5
    assert keysym_for_char("\n") == XK.XK_Return
    with pytest.raises(UnknownKey, match="control character"):
        keysym_for_char("\x07")


def test_modern_and_legacy_models_and_dicts_plan_alike() -> None:
    expected = A.Click(5, 6, 3, 1, ())
    assert A.plan(modern.Click(type="click", x=5, y=6, button="right"), SIZE) == expected
    assert A.plan(legacy.ActionClick(type="click", x=5, y=6, button="right"), SIZE) == expected
    assert A.plan({"type": "click", "x": 5, "y": 6, "button": "right"}, SIZE) == expected


@pytest.mark.parametrize(
    ("action", "error", "named"),
    [
        ({"type": "click", "x": 1280, "y": 0, "button": "left"}, OutOfBounds, "(1280, 0)"),
        ({"type": "click", "x": -1, "y": 5, "button": "left"}, OutOfBounds, "(-1, 5)"),
        ({"type": "move", "x": 3, "y": 800}, OutOfBounds, "(3, 800)"),
        ({"type": "click", "x": True, "y": 5, "button": "left"}, ActionRejected, "True"),
        ({"type": "click", "x": 1.5, "y": 5, "button": "left"}, ActionRejected, "1.5"),
        ({"type": "click", "x": 1, "y": 5, "button": "middle"}, ActionRejected, "'middle'"),
        ({"type": "drag", "path": []}, ActionRejected, "[]"),
        ({"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 1, "y": 9000}]}, OutOfBounds, "point 1"),
        ({"type": "keypress", "keys": []}, ActionRejected, "[]"),
        ({"type": "keypress", "keys": ["CTRL", "NOPE"]}, UnknownKey, "'NOPE'"),
        ({"type": "click", "x": 1, "y": 1, "button": "left", "keys": ["HYPERSPACE"]}, UnknownKey, "'HYPERSPACE'"),
        ({"type": "type", "text": "a\x00b"}, UnknownKey, "index 1"),
        ({"type": "type", "text": "x" * (A.MAX_TEXT_CHARS + 1)}, ActionRejected, str(A.MAX_TEXT_CHARS + 1)),
        ({"type": "scroll", "x": 1, "y": 1, "scroll_x": 0, "scroll_y": 10**6}, ActionRejected, "1000000"),
        ({"type": "teleport"}, ActionRejected, "'teleport'"),
    ],
)
def test_bad_actions_are_rejected_naming_the_value(action: dict, error: type, named: str) -> None:
    with pytest.raises(error) as info:
        A.plan(action, SIZE)
    assert named in str(info.value)


def test_scroll_pixels_map_to_wheel_notches() -> None:
    step = A.plan({"type": "scroll", "x": 1, "y": 2, "scroll_x": -100, "scroll_y": 300}, SIZE)
    assert step.wheel == ((A.WHEEL_DOWN, 3), (A.WHEEL_LEFT, 1))
    step = A.plan({"type": "scroll", "x": 1, "y": 2, "scroll_x": 20, "scroll_y": -1}, SIZE)
    assert step.wheel == ((A.WHEEL_UP, 1), (A.WHEEL_RIGHT, 1))
    assert A.plan({"type": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 0}, SIZE).wheel == ()


def test_crlf_is_one_line_break() -> None:
    assert A.plan({"type": "type", "text": "a\r\nb"}, SIZE).text == "a\nb"
