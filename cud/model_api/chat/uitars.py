"""UI-TARS(-1.5): ``Thought: ...`` then ``Action: click(start_box='(x,y)')``, in the pixels of the smart-resized screenshot.

Source: github:bytedance/UI-TARS, ``codes/ui_tars/prompt.py`` (the prompt) and
``codes/ui_tars/action_parser.py`` (``parse_action_to_structure_output`` with
``model_type="qwen25vl"`` and ``parsing_response_to_pyautogui_code``; published on PyPI as
``ui-tars``, which the tests run against this parser). Both are Apache-2.0.

Prompt: ``COMPUTER_USE_DOUBAO`` of ``prompt.py`` verbatim, ``{language}`` English; one user message
with the prompt and the task, then for each of the last :data:`HISTORY` steps its screenshot (user)
and the model's answer (assistant), then the current screenshot.

Grammar (one or more actions after ``Action:``, separated by a blank line; each a Python call with
string keyword arguments, read with :mod:`ast`, never run):

==========================================  ====================================================
UI-TARS                                     protocol
==========================================  ====================================================
click / left_single(start_box)              ``click`` button left
left_double(start_box)                      ``double_click``
right_single(start_box)                     ``click`` button right
hover(start_box)                            ``move``
drag / select(start_box, end_box)           ``drag`` from start to end
hotkey(key='ctrl c')                        one ``keypress`` of the space-separated keys
press(key='enter')                          ``keypress`` of that key (a tap; the reference only
                                            presses it down and never releases it)
type(content='...')                         ``type`` of the content, its Python escapes (\\n, \\',
                                            \\") resolved; a trailing newline types Return
scroll(start_box, direction)                ``scroll`` of 5 notches (the reference's
                                            ``pyautogui.scroll(5)``) up/down; left/right too
                                            (the reference drops those)
wait()                                      ``wait``
finished(content='...')                     ``final`` (the content, "" without one)
call_user()                                 ``call_user`` (its content, else the thought)
==========================================  ====================================================

A box is ``'(x,y)'`` or ``'(x1,y1,x2,y2)'`` (its centre, ``(x1 + x2) // 2``), optionally wrapped
in ``<|box_start|>...<|box_end|>``; the newer ``point='<point>x y</point>'`` (and
``start_point``/``end_point``) means the same. Coordinates are pixels of the screenshot after
Qwen2.5-VL's ``smart_resize`` (the parser divides them by the smart-resized size; UI-TARS-1.5
is Qwen2.5-VL based): the space is that size, and :meth:`image` sends the screenshot at it.
UI-TARS 1.0 (Qwen2-VL based, relative coordinates in 0..1000) is not this format.

Refused, with the reason: ``keydown``/``keyup``/``release``/``mouse_down``/``mouse_up`` (a key
or button held across steps has no action in cud's drivers), the mobile actions
(``long_press``, ``open_app``, ``press_home``, ``press_back``), any other name, a call whose
arguments are not plain strings, a box of other than 2 or 4 numbers, a scroll without a point
or direction, and an answer with no ``Action:``.
"""

from __future__ import annotations

import ast
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed
from cud.model_api.chat import Reply, Turn
from cud.model_api.chat.actions import (
    DIRECTIONS,
    click,
    double_click,
    drag,
    image_part,
    keypress,
    move,
    out_of_bounds,
    past_turns,
    scroll,
    text_part,
    type_text,
    unparsed,
    wait,
)
from cud.model_api.chat.resize import image, smart_space
from cud.model_api.scaling import ScreenScale

__all__ = ("HISTORY", "NAME", "PROMPT", "SCROLL_NOTCHES", "image", "parse", "render", "request", "space")

NAME = "ui-tars"
#: OSWorld's UI-TARS-1.5 agent keeps the last 5 screenshots.
HISTORY = 5
#: The reference's processor limits (action_parser.py MIN_PIXELS / MAX_PIXELS).
MIN_PIXELS = 100 * 28 * 28
MAX_PIXELS = 16384 * 28 * 28
#: One scroll of the reference is pyautogui.scroll(+-5): five wheel notches.
SCROLL_NOTCHES = 5

# The prompt's lines (verbatim, one trailing blank included; split only to keep the source's lines short).
PROMPT = "\n".join((
    'You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the '
    'next action to complete the task.',
    '',
    '## Output Format',
    '```',
    'Thought: ...',
    'Action: ...',
    '```',
    '',
    '## Action Space',
    '',
    "click(point='<point>x1 y1</point>')",
    "left_double(point='<point>x1 y1</point>')",
    "right_single(point='<point>x1 y1</point>')",
    "drag(start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>')",
    "hotkey(key='ctrl c') # Split keys with a space and use lowercase. Also, do not use more than 3 keys in one "
    'hotkey action.',
    'type(content=\'xxx\') # Use escape characters \\\', \\", and \\n in content part to ensure we can parse the '
    'content in normal python string format. If you want to submit your input, use \\n at the end of content. ',
    "scroll(point='<point>x1 y1</point>', direction='down or up or right or left') # Show more information on the "
    '`direction` side.',
    'wait() #Sleep for 5s and take a screenshot to check for any changes.',
    'finished(content=\'xxx\') # Use escape characters \\\', \\", and \\n in content part to ensure we can parse '
    'the content in normal python string format.',
    '',
    '',
    '## Note',
    '- Use {language} in `Thought` part.',
    '- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.',
    '',
    '## User Instruction',
    '{instruction}',
    '',
))

_HELD = {"keydown", "keyup", "release", "mouse_down", "mouse_up"}
_MOBILE = {"long_press", "open_app", "press_home", "press_back"}
_POINT = re.compile(r"<point>\s*(-?[\d.]+)\s+(-?[\d.]+)\s*</point>")
_TYPE = re.compile(r"type\(\s*content\s*=\s*'(.*)'\s*\)\s*$", re.DOTALL)


def space(width: int, height: int) -> ScreenScale:
    return smart_space(width, height, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)


def request(instruction: str, past: Sequence[Turn], screenshot: bytes, space: ScreenScale) -> list[dict[str, Any]]:
    # str.replace, not str.format: the task's text is data and may hold braces.
    prompt = PROMPT.replace("{language}", "English").replace("{instruction}", instruction)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [text_part(prompt)]}]
    messages += past_turns(past, HISTORY)
    messages.append({"role": "user", "content": [image_part(screenshot)]})
    return messages


def parse(text: str, space: ScreenScale) -> Reply:
    body = text.strip()
    if "Action:" not in body:
        raise unparsed(NAME, text, "has no 'Action:'")
    head, _, action_text = body.rpartition("Action:")
    thought_match = re.search(r"(?:Thought|Action_Summary):\s*(.+)", head, re.DOTALL)
    thought = (thought_match.group(1).strip() or None) if thought_match else None
    action_text = _POINT.sub(r"(\1,\2)", action_text)
    actions: list[dict[str, Any]] = []
    final = call_user = None
    for call_text in action_text.strip().split(")\n\n"):
        call_text = call_text.strip()
        if not call_text.endswith(")"):
            call_text += ")"
        if final is not None or call_user is not None:
            raise unparsed(NAME, text, f"has an action after the one that ends the step ({call_text!r})")
        name, args = _call(call_text, text)
        if name == "finished":
            final = args.get("content", "")
        elif name == "call_user":
            call_user = args.get("content") or thought or ""
        else:
            actions.extend(_actions(name, args, space, call_text, text))
    return Reply(actions, thought=thought, final=final, call_user=call_user)


def _call(call_text: str, text: str) -> tuple[str, dict[str, str]]:
    """The name and string arguments of one call; the content of ``type`` as the reference reads it
    (its own quotes need no escape: everything up to the call's last ``')`` is the content)."""
    typed = _TYPE.match(call_text)
    if typed:
        content = re.sub(r"(?<!\\)'", r"\\'", typed.group(1))
        call_text = "type(content='" + content + "')"
    try:
        tree = ast.parse(call_text.replace("\n", "\\n"), mode="eval")
    except SyntaxError:
        raise unparsed(NAME, text, f"has an action that is no call: {call_text!r}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
        raise unparsed(NAME, text, f"has an action that is no call with keyword arguments: {call_text!r}")
    args: dict[str, str] = {}
    for keyword in call.keywords:
        value = keyword.value
        if keyword.arg is None or not isinstance(value, ast.Constant) or not isinstance(value.value, str):
            raise unparsed(NAME, text, f"has an argument that is not a plain string in {call_text!r}")
        if value.value != "":
            # The reference drops empty arguments; the point forms are names for the boxes.
            name = {"point": "start_box", "start_point": "start_box", "end_point": "end_box"}.get(keyword.arg, keyword.arg)
            args[name] = value.value
    return call.func.id, args


def _box(value: str | None, what: str) -> tuple[float, float]:
    """The point a box string means: ``(x,y)`` itself, ``(x1,y1,x2,y2)`` its centre."""
    if value is None:
        raise out_of_bounds(what, value)
    inner = value.replace("<|box_start|>", "").replace("<|box_end|>", "").strip()
    numbers = inner.replace("(", "").replace(")", "").replace("[", "").replace("]", "").split(",")
    try:
        values = [float(n) if "." in n or "e" in n.lower() else int(n) for n in numbers]
    except ValueError:
        raise out_of_bounds(what, value) from None
    if len(values) == 2:
        return values[0], values[1]
    if len(values) == 4:
        return _centre(values[0], values[2]), _centre(values[1], values[3])
    raise out_of_bounds(what, value)


def _centre(a: float, b: float) -> float:
    # Whole numbers stay whole (the reference's "<point>" form truncates: (x1 + x2) // 2).
    return (a + b) // 2 if isinstance(a, int) and isinstance(b, int) else (a + b) / 2


def _actions(name: str, args: dict[str, str], space: ScreenScale, call_text: str, text: str) -> list[dict[str, Any]]:
    what = f"{name} start_box {args.get('start_box')!r}"
    if name in ("click", "left_single", "left_double", "right_single", "hover"):
        x, y = _box(args.get("start_box"), what)
        if name == "left_double":
            return [double_click(space, x, y, what)]
        if name == "hover":
            return [move(space, x, y, what)]
        return [click(space, x, y, "right" if name == "right_single" else "left", what)]
    if name in ("drag", "select"):
        start = _box(args.get("start_box"), what)
        end = _box(args.get("end_box"), f"{name} end_box {args.get('end_box')!r}")
        return [drag(space, [start, end], name)]
    if name == "scroll":
        direction = args.get("direction", "").strip().lower()
        if direction not in DIRECTIONS:
            raise unparsed(NAME, text, f"scrolls in no direction of {sorted(DIRECTIONS)}: {call_text!r}")
        x, y = _box(args.get("start_box"), what)
        return [scroll(space, x, y, direction, SCROLL_NOTCHES, what)]
    if name == "hotkey":
        keys = (args.get("key") or args.get("hotkey") or "").split()
        return [keypress(keys, f"hotkey {call_text!r}")]
    if name == "press":
        key = (args.get("key") or args.get("press") or "").strip()
        return [keypress([key] if key else [], f"press {call_text!r}")]
    if name == "type":
        return [type_text(args.get("content", ""))]
    if name == "wait":
        return [wait()]
    if name in _HELD:
        raise ComputerUseFailed(f"the model asked for {call_text!r}: a key or button held across steps has no "
                                "action in cud's drivers (they press a chord and release it; use hotkey or drag)",
                                action=name)
    if name in _MOBILE:
        raise ComputerUseFailed(f"the model asked for {call_text!r}, an action of UI-TARS's mobile prompt; "
                                "cud runs desktops", action=name)
    raise unparsed(NAME, text, f"asks for an unknown action {name!r}")


def render(actions: Sequence[dict[str, Any]], thought: str = "", final: str | None = None,
           call_user: str | None = None, gave_up: bool = False) -> str:
    if gave_up:
        raise ValueError("UI-TARS has no way to say the task failed (it calls the user instead)")
    calls = [_render(action) for action in actions]
    if final is not None:
        calls.append(f"finished(content='{_escape(final)}')" if final else "finished()")
    if call_user is not None:
        calls.append(f"call_user(content='{_escape(call_user)}')" if call_user else "call_user()")
    if not calls:
        raise ValueError("an answer needs an action, a final message or a question")
    return f"Thought: {thought}\nAction: " + "\n\n".join(calls)


def _render(action: dict[str, Any]) -> str:
    kind = action["type"]
    if kind in ("click", "double_click", "move") and not action.get("keys"):
        name = {"double_click": "left_double", "move": "hover"}.get(kind) or {
            "left": "click", "right": "right_single"}.get(action.get("button", "left"))
        if name is not None:
            return f"{name}(point='{_point(action['x'], action['y'])}')"
    elif kind == "drag" and len(action["path"]) == 2:
        (start, end) = action["path"]
        return (f"drag(start_point='{_point(start['x'], start['y'])}', "
                f"end_point='{_point(end['x'], end['y'])}')")
    elif kind == "keypress":
        keys = action["keys"]
        return f"hotkey(key='{' '.join(keys)}')" if len(keys) > 1 else f"press(key='{keys[0]}')"
    elif kind == "type":
        return f"type(content='{_escape(action['text'])}')"
    elif kind == "wait":
        return "wait()"
    elif kind == "scroll" and not action.get("keys"):
        for direction, (sign_x, sign_y) in DIRECTIONS.items():
            step = SCROLL_NOTCHES * SCROLL_PIXELS_PER_NOTCH
            if (action["scroll_x"], action["scroll_y"]) == (sign_x * step, sign_y * step):
                return f"scroll(point='{_point(action['x'], action['y'])}', direction='{direction}')"
    raise ValueError(f"UI-TARS has no action for {action!r}")


def _point(x: int, y: int) -> str:
    return f"<point>{x} {y}</point>"


def _escape(text: str) -> str:
    """``text`` as the prompt asks the model to write it: Python escapes for \\, ', ", newlines and
    every other control character (the answer is read as a Python string literal)."""
    return "".join(_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if unicodedata.category(char) == "Cc" else char)
                   for char in text)


_ESCAPES = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
