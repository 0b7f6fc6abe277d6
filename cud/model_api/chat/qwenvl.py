"""Qwen2.5-VL's computer use: ``<tool_call>{"name": "computer_use", "arguments": {...}}</tool_call>`` in the
pixels of the smart-resized screenshot.

Source: github:QwenLM/Qwen2.5-VL (Apache-2.0): ``cookbooks/utils/agent_function_call.py`` (the
``computer_use`` tool: its description and parameters, verbatim here) and
``cookbooks/computer_use.ipynb`` (the tool declared with the screen's size as the processor
resizes it, ``smart_resize`` of ``qwen-vl-utils`` with the processor's min_pixels 3136 and
max_pixels 12845056, and the answer's ``<tool_call>`` JSON read as the action, its coordinate
drawn on the resized image). The tests hold cud to a vendored copy (tests/support/qwen_reference.py).

Prompt: qwen-agent's function-calling system prompt (its ``NousFnCallPrompt``: "You are a
helpful assistant." then ``# Tools`` with the tool's JSON in ``<tools>``, and how to answer in
``<tool_call>``), the tool declaring the smart-resized size; then the task, the last
:data:`HISTORY` steps (screenshot, answer) and the current screenshot.

Each ``<tool_call>`` of the answer is one call (JSON; its ``name`` must be ``computer_use``);
the text around them is the thought.

============================  ==========================================================
computer_use action           protocol
============================  ==========================================================
left/right/middle_click       ``click`` with button left/right/wheel at ``coordinate``
double_click                  ``double_click``
mouse_move                    ``move``
mouse_move then               one ``drag`` from the move's point to ``coordinate``
left_click_drag
left_click_drag               a ``drag`` whose path is its end alone (from the pointer)
key (keys: [...])             one ``keypress`` of the chord (keys down in order, up reversed)
type (text)                   ``type``
scroll (pixels)               ``scroll`` of ``pixels`` wheel notches (positive: up, as
                              pyautogui, which OSWorld's Qwen agent runs it with)
wait (time)                   ``wait``
terminate (status)            ``final`` (the thought, else the status); ``gave_up`` on
                              failure. Nothing may follow it.
============================  ==========================================================

A click or scroll without ``coordinate`` acts where the pointer is: its action has no ``x``/``y``
(:class:`~cud.model_api.chat.Reply` says who fills it in). Qwen2.5-VL cannot ask the user.
Refused: another tool name, an unknown action, JSON that does not parse, keys not a list of
names, a terminate status other than success/failure, an answer with no ``<tool_call>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed
from cud.model_api.chat import Reply, Turn
from cud.model_api.chat.actions import (
    drag,
    image_part,
    keypress,
    model_point,
    move,
    past_turns,
    text_part,
    type_text,
    unparsed,
    wait,
)
from cud.model_api.chat.resize import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, image, smart_space
from cud.model_api.scaling import ScreenScale

__all__ = ("DESCRIPTION", "HISTORY", "NAME", "PARAMETERS", "image", "parse", "render", "request", "space",
           "system_prompt")

NAME = "qwen-vl"
#: Past steps (their screenshot and answer) a request carries.
HISTORY = 4
TOOL = "computer_use"

DESCRIPTION = "\n".join((
    'Use a mouse and keyboard to interact with a computer, and take screenshots.',
    '* This is an interface to a desktop GUI. You do not have access to a terminal or applications '
    'menu. You must click on desktop icons to start applications.',
    '* Some applications may take time to start or process actions, so you may need to wait and take '
    'successive screenshots to see the results of your actions. E.g. if you click on Firefox and a '
    "window doesn't open, try wait and taking another screenshot.",
    "* The screen's resolution is {width}x{height}.",
    '* Whenever you intend to move the cursor to click on an element like an icon, you should consult a '
    'screenshot to determine the coordinates of the element before moving the cursor.',
    '* If you tried clicking on a program or link but it failed to load, even after waiting, try '
    'adjusting your cursor position so that the tip of the cursor visually falls on the element that '
    'you want to click.',
    '* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the '
    "element. Don't click boxes on their edges unless asked.",
))

_ACTIONS_DOC = "\n".join((
    'The action to perform. The available actions are:',
    '* `key`: Performs key down presses on the arguments passed in order, then performs key releases in '
    'reverse order.',
    '* `type`: Type a string of text on the keyboard.',
    '* `mouse_move`: Move the cursor to a specified (x, y) pixel coordinate on the screen.',
    '* `left_click`: Click the left mouse button.',
    '* `left_click_drag`: Click and drag the cursor to a specified (x, y) pixel coordinate on the screen.',
    '* `right_click`: Click the right mouse button.',
    '* `middle_click`: Click the middle mouse button.',
    '* `double_click`: Double-click the left mouse button.',
    '* `scroll`: Performs a scroll of the mouse scroll wheel.',
    '* `wait`: Wait specified seconds for the change to happen.',
    '* `terminate`: Terminate the current task and report its completion status.',
))

_ACTIONS = ["key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click",
            "double_click", "scroll", "wait", "terminate"]
#: The tool's parameters, as agent_function_call.py declares them.
PARAMETERS: dict[str, Any] = {
    "properties": {
        "action": {"description": _ACTIONS_DOC, "enum": _ACTIONS, "type": "string"},
        "keys": {"description": "Required only by `action=key`.", "type": "array"},
        "text": {"description": "Required only by `action=type`.", "type": "string"},
        "coordinate": {
            "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top edge) coordinates to "
                           "move the mouse to. Required only by `action=mouse_move` and `action=left_click_drag`.",
            "type": "array",
        },
        "pixels": {
            "description": "The amount of scrolling to perform. Positive values scroll up, negative values scroll "
                           "down. Required only by `action=scroll`.",
            "type": "number",
        },
        "time": {"description": "The seconds to wait. Required only by `action=wait`.", "type": "number"},
        "status": {"description": "The status of the task. Required only by `action=terminate`.", "type": "string",
                   "enum": ["success", "failure"]},
    },
    "required": ["action"],
    "type": "object",
}
_CLICKS = {"left_click": "left", "right_click": "right", "middle_click": "wheel"}
_STATUSES = ("success", "failure")
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def system_prompt(space: ScreenScale) -> str:
    """qwen-agent's function-calling system prompt with the tool declared at the model's screen size."""
    description = DESCRIPTION.replace("{width}", str(space.model_width)).replace("{height}", str(space.model_height))
    function = {"name_for_human": TOOL, "name": TOOL, "description": description, "parameters": PARAMETERS,
                "args_format": "Format the arguments as a JSON object."}
    tool = json.dumps({"type": "function", "function": function}, ensure_ascii=False)
    return ("You are a helpful assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
            "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            f"{tool}\n</tools>\n\nFor each function call, return a json object with function name and arguments "
            "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
            '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


def space(width: int, height: int) -> ScreenScale:
    return smart_space(width, height, min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS)


def request(instruction: str, past: Sequence[Turn], screenshot: bytes, space: ScreenScale) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt(space)},
                                      {"role": "user", "content": [text_part(instruction)]}]
    messages += past_turns(past, HISTORY)
    messages.append({"role": "user", "content": [image_part(screenshot)]})
    return messages


def parse(text: str, space: ScreenScale) -> Reply:
    bodies = _CALL.findall(text)
    if not bodies:
        raise unparsed(NAME, text, "has no <tool_call>")
    thought = _CALL.sub("", text).strip() or None
    actions: list[dict[str, Any]] = []
    moved: tuple[object, object] | None = None
    final: str | None = None
    gave_up = False
    for body in bodies:
        try:
            call = json.loads(body)
        except json.JSONDecodeError as error:
            raise unparsed(NAME, text, f"has a tool call that is not JSON ({error.msg})") from None
        if not isinstance(call, dict) or call.get("name") != TOOL or not isinstance(call.get("arguments"), dict):
            raise unparsed(NAME, text, f"has a tool call that is no {TOOL} call with arguments: {body!r}")
        if final is not None:
            raise unparsed(NAME, text, "has a tool call after terminate")
        args = call["arguments"]
        name = args.get("action")
        if moved is not None and name != "left_click_drag":
            actions.append(move(space, *moved, "mouse_move coordinate"))
            moved = None
        if name == "mouse_move":
            moved = _coordinate(args, name, text)
        elif name == "left_click_drag":
            end = _coordinate(args, name, text)
            if moved is None:
                actions.append(drag(space, [end], "left_click_drag coordinate"))
            else:
                actions.append(drag(space, [moved, end], "mouse_move then left_click_drag"))
            moved = None
        elif name in _CLICKS or name == "double_click":
            actions.append(_at(args, name, text, space, {"type": "double_click"} if name == "double_click"
                               else {"type": "click", "button": _CLICKS[name]}))
        elif name == "key":
            keys = args.get("keys")
            if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
                raise unparsed(NAME, text, f"has a key action whose keys are no list of names: {keys!r}")
            actions.append(keypress(keys, f"key {keys!r}"))
        elif name == "type":
            if not isinstance(args.get("text"), str):
                raise unparsed(NAME, text, f"has a type action without text: {args!r}")
            actions.append(type_text(args["text"]))
        elif name == "scroll":
            pixels = args.get("pixels")
            if not isinstance(pixels, int) or isinstance(pixels, bool):
                raise unparsed(NAME, text, f"scrolls no whole number of notches: {pixels!r}")
            actions.append(_at(args, name, text, space, {"type": "scroll", "scroll_x": 0,
                                                         "scroll_y": -pixels * SCROLL_PIXELS_PER_NOTCH}))
        elif name == "wait":
            actions.append(wait())
        elif name == "terminate":
            status = args.get("status")
            if status not in _STATUSES:
                raise unparsed(NAME, text, f"terminates with status {status!r}, not one of {_STATUSES}")
            final, gave_up = thought or status, status == "failure"
        else:
            raise ComputerUseFailed(f"the model asked for computer_use action {name!r}, none of {_ACTIONS}: {body!r}",
                                    action=repr(name))
    if moved is not None:
        actions.append(move(space, *moved, "mouse_move coordinate"))
    return Reply(actions, thought=thought, final=final, gave_up=gave_up)


def _coordinate(args: dict[str, Any], name: str, text: str) -> tuple[object, object]:
    value = args.get("coordinate")
    if not isinstance(value, list) or len(value) != 2:
        raise unparsed(NAME, text, f"has a {name} whose coordinate is no [x, y]: {value!r}")
    return value[0], value[1]


def _at(args: dict[str, Any], name: str, text: str, space: ScreenScale, action: dict[str, Any]) -> dict[str, Any]:
    """``action`` at the call's coordinate, or without a point (where the pointer is) when it has none."""
    if args.get("coordinate") is None:
        return action
    x, y = model_point(space, *_coordinate(args, name, text), f"{name} coordinate")
    return {**action, "x": x, "y": y}


def render(actions: Sequence[dict[str, Any]], thought: str = "", final: str | None = None,
           call_user: str | None = None, gave_up: bool = False) -> str:
    if call_user is not None:
        raise ValueError("Qwen2.5-VL's computer_use has no way to ask the user")
    if gave_up and final is None:
        raise ValueError("gave_up ends the task: it needs a final message")
    calls = [call for action in actions for call in _calls(action)]
    if final is not None:
        if final != thought:
            raise ValueError("Qwen2.5-VL says its final words as the thought: final must be the thought")
        calls.append({"action": "terminate", "status": "failure" if gave_up else "success"})
    if not calls:
        raise ValueError("an answer needs an action or a final message")
    return thought + "".join(
        "\n<tool_call>\n" + json.dumps({"name": TOOL, "arguments": call}, ensure_ascii=False) + "\n</tool_call>"
        for call in calls)


def _calls(action: dict[str, Any]) -> list[dict[str, Any]]:
    kind = action["type"]
    at = {"coordinate": [action["x"], action["y"]]} if "x" in action else {}
    if action.get("keys") and kind in ("click", "double_click", "scroll"):
        raise ValueError(f"computer_use has no click or scroll with keys held: {action!r}")
    if kind == "click":
        return [{"action": {"left": "left_click", "right": "right_click", "wheel": "middle_click"}[action["button"]],
                 **at}]
    if kind == "double_click":
        return [{"action": "double_click", **at}]
    if kind == "move":
        return [{"action": "mouse_move", **at}]
    if kind == "drag" and len(action["path"]) in (1, 2):
        *start, end = action["path"]
        moves = [{"action": "mouse_move", "coordinate": [start[0]["x"], start[0]["y"]]}] if start else []
        return [*moves, {"action": "left_click_drag", "coordinate": [end["x"], end["y"]]}]
    if kind == "keypress":
        return [{"action": "key", "keys": list(action["keys"])}]
    if kind == "type":
        return [{"action": "type", "text": action["text"]}]
    if kind == "scroll" and action["scroll_x"] == 0 and action["scroll_y"] % SCROLL_PIXELS_PER_NOTCH == 0:
        return [{"action": "scroll", "pixels": -action["scroll_y"] // SCROLL_PIXELS_PER_NOTCH, **at}]
    if kind == "wait":
        return [{"action": "wait", "time": 1}]
    raise ValueError(f"computer_use has no call for {action!r}")
