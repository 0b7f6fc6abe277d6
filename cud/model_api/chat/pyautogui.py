"""The pyautogui code some models answer with, read with :mod:`ast` (never run) into protocol actions.

Each statement must be one call of a known function with literal arguments (numbers, strings,
lists of strings), positional or by keyword as pyautogui's own signatures name them; anything
else (a variable, an expression, a loop) is refused quoting the code. ``import`` lines are skipped.

=========================================  ===============================================
pyautogui                                  protocol
=========================================  ===============================================
click(x, y, clicks=1, button='left')       ``click`` (button left/right/middle -> wheel);
                                           clicks=2 ``double_click``, 3 a triple click
doubleClick / rightClick / middleClick     ``double_click`` / ``click`` right / wheel
tripleClick                                ``double_click`` then ``click`` (as Anthropic's)
moveTo(x, y)                               ``move``
moveTo(a, b) then dragTo(x, y)             one ``drag`` from (a, b) to (x, y)
write / typewrite(message)                 ``type``
press(keys, presses=1)                     one ``keypress`` per key, ``presses`` times
hotkey('ctrl', 'c') / hotkey(keys=[...])   one ``keypress`` of the chord
scroll(clicks, x, y) / hscroll             ``scroll`` of ``clicks`` notches (positive: up /
                                           right, as pyautogui) at (x, y); without x, y
                                           where the pointer is (no ``x``/``y`` in it)
time.sleep(s)                              ``wait``
=========================================  ===============================================

Refused: keyDown/keyUp/mouseDown/mouseUp (a key or button held across actions has no protocol
action), a dragTo with no moveTo before it in the same code (its start is not in the answer),
clicks other than 1..3 (2 and 3 with the left button only), any other function.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.errors import ComputerUseFailed
from cud.model_api.chat.actions import click, double_click, drag, keypress, model_point, move, type_text
from cud.model_api.scaling import ScreenScale

__all__ = ("SIGNATURES", "Call", "action_code", "calls", "flush", "to_actions")

#: pyautogui's positional parameters, per function (what a positional argument is called).
SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("x", "y", "clicks", "interval", "button"),
    "doubleClick": ("x", "y", "interval", "button"),
    "rightClick": ("x", "y"),
    "middleClick": ("x", "y"),
    "tripleClick": ("x", "y", "interval", "button"),
    "moveTo": ("x", "y", "duration"),
    "dragTo": ("x", "y", "duration", "button"),
    "write": ("message", "interval"),
    "typewrite": ("message", "interval"),
    "press": ("keys", "presses", "interval"),
    "hotkey": ("keys",),  # pyautogui.hotkey(*keys): every positional argument is a key
    "scroll": ("clicks", "x", "y"),
    "hscroll": ("clicks", "x", "y"),
    "keyDown": ("key",), "keyUp": ("key",), "mouseDown": ("x", "y", "button"), "mouseUp": ("x", "y", "button"),
}
_HELD = {"keyDown", "keyUp", "mouseDown", "mouseUp"}
_BUTTONS = {"left": "left", "right": "right", "middle": "wheel"}

Call = tuple[str, str, dict[str, Any]]
"""One call: its module (``pyautogui``, ``computer``, ``time``), its function and its arguments by name."""


def calls(code: str, signatures: dict[str, dict[str, tuple[str, ...]]], refuse: Callable[[str], Exception]) -> list[Call]:
    """The calls of ``code``: ``signatures`` names each module's functions and their positional
    parameters; ``refuse(why)`` makes the error for code that is not a list of such calls."""
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        raise refuse(f"has code that is not Python ({error.msg}, line {error.lineno})") from None
    result: list[Call] = []
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            continue
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)):
            raise refuse(f"has a statement that is no call of a known function: {ast.unparse(statement)!r}")
        module, function = call.func.value.id, call.func.attr
        params = signatures.get(module, {}).get(function)
        if params is None:
            raise refuse(f"calls an unknown function {module}.{function}")
        result.append((module, function, _arguments(call, params, refuse)))
    return result


def _arguments(call: ast.Call, params: tuple[str, ...], refuse: Callable[[str], Exception]) -> dict[str, Any]:
    where = ast.unparse(call)
    args: dict[str, Any] = {}
    try:
        if params == SIGNATURES["hotkey"] and call.args:
            args["keys"] = [ast.literal_eval(arg) for arg in call.args]
        else:
            if len(call.args) > len(params):
                raise refuse(f"passes too many arguments in {where!r}")
            args.update({name: ast.literal_eval(arg) for name, arg in zip(params, call.args, strict=False)})
        for keyword in call.keywords:
            if keyword.arg is None:
                raise refuse(f"unpacks arguments in {where!r}")
            args[keyword.arg] = ast.literal_eval(keyword.value)
    except ValueError:
        raise refuse(f"has an argument that is no literal in {where!r}") from None
    return args


def to_actions(function: str, args: dict[str, Any], space: ScreenScale, pending: list[tuple[object, object]],
               where: str) -> list[dict[str, Any]]:
    """The protocol actions of one pyautogui call. ``pending`` carries a ``moveTo``'s point to the
    ``dragTo`` right after it (a lone move is emitted when the next call is no drag: :func:`flush`)."""
    what = f"pyautogui.{function} ({where})"
    if function in _HELD:
        raise ComputerUseFailed(f"the model asked for {where!r}: a key or button held across actions has no "
                                "action in cud's drivers (use hotkey, or moveTo then dragTo)", action=function)
    if function == "dragTo":
        if not pending:
            raise ComputerUseFailed(f"the model's {where!r} has no pyautogui.moveTo before it, so its start "
                                    "is unknown", action=function)
        start = pending.pop()
        return [drag(space, [start, (args.get("x"), args.get("y"))], what)]
    actions = flush(space, pending, what)
    if function == "moveTo":
        pending.append((args.get("x"), args.get("y")))
        return actions
    x, y = args.get("x"), args.get("y")
    if function in ("click", "doubleClick", "rightClick", "middleClick", "tripleClick"):
        clicks = {"doubleClick": 2, "tripleClick": 3}.get(function, args.get("clicks", 1))
        button = {"rightClick": "right", "middleClick": "middle"}.get(function, args.get("button", "left"))
        if button not in _BUTTONS:
            raise ComputerUseFailed(f"the model's {where!r} names no mouse button of {sorted(_BUTTONS)}", button=button)
        if clicks == 1:
            return [*actions, click(space, x, y, _BUTTONS[button], what)]
        if clicks in (2, 3) and button == "left":
            double = double_click(space, x, y, what)
            return [*actions, double] + ([{"type": "click", "x": double["x"], "y": double["y"], "button": "left"}]
                                         if clicks == 3 else [])
        raise ComputerUseFailed(f"the model's {where!r} clicks {clicks!r} times with {button!r}; cud clicks "
                                "1 time with any button, 2 or 3 with the left one", clicks=repr(clicks))
    if function in ("write", "typewrite"):
        message = args.get("message")
        if not isinstance(message, str):
            raise ComputerUseFailed(f"the model's {where!r} types no text", action=function)
        return [*actions, type_text(message)]
    if function in ("press", "hotkey"):
        keys = args.get("keys", [])
        keys = [keys] if isinstance(keys, str) else keys
        if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
            raise ComputerUseFailed(f"the model's {where!r} names no keys", action=function)
        if function == "hotkey":
            return [*actions, keypress(keys, where)]
        presses = args.get("presses", 1)
        if not isinstance(presses, int) or isinstance(presses, bool) or not 1 <= presses <= 100:
            raise ComputerUseFailed(f"the model's {where!r} presses {presses!r} times (1..100)", action=function)
        return [*actions, *[keypress([key], where) for _ in range(presses) for key in keys]]
    if function in ("scroll", "hscroll"):
        return [*actions, _scroll(function, args, space, where, what)]
    raise ComputerUseFailed(f"the model asked for {where!r}, which cud has no action for", action=function)


def _scroll(function: str, args: dict[str, Any], space: ScreenScale, where: str, what: str) -> dict[str, Any]:
    clicks = args.get("clicks")
    if not isinstance(clicks, int) or isinstance(clicks, bool):
        raise ComputerUseFailed(f"the model's {where!r} scrolls no whole number of notches", action=function)
    # pyautogui: a positive scroll goes up, a positive hscroll right; the protocol's positive scroll_y is down.
    pixels = clicks * SCROLL_PIXELS_PER_NOTCH
    action: dict[str, Any] = {"type": "scroll", "scroll_x": pixels if function == "hscroll" else 0,
                              "scroll_y": -pixels if function == "scroll" else 0}
    if args.get("x") is None and args.get("y") is None:
        return action  # where the pointer is (Reply's docstring: the adapter names that point)
    x, y = model_point(space, args.get("x"), args.get("y"), what)
    return {**action, "x": x, "y": y}


def flush(space: ScreenScale, pending: list[tuple[object, object]], what: str) -> list[dict[str, Any]]:
    """The ``move`` of a ``moveTo`` no ``dragTo`` followed."""
    actions = [move(space, x, y, what) for x, y in pending]
    pending.clear()
    return actions


def action_code(action: dict[str, Any]) -> list[str]:
    """The pyautogui lines of one protocol action whose coordinates are in the model's space."""
    kind = action["type"]
    if action.get("keys") and kind in ("click", "double_click", "scroll"):
        raise ValueError(f"pyautogui has no click or scroll with keys held: {action!r}")
    if kind == "click":
        button = {"left": "left", "right": "right", "wheel": "middle"}[action.get("button", "left")]
        return [f"pyautogui.click(x={action['x']}, y={action['y']}, button={button!r})"]
    if kind == "double_click":
        return [f"pyautogui.doubleClick(x={action['x']}, y={action['y']})"]
    if kind == "move":
        return [f"pyautogui.moveTo(x={action['x']}, y={action['y']})"]
    if kind == "drag" and len(action["path"]) == 2:
        start, end = action["path"]
        return [f"pyautogui.moveTo(x={start['x']}, y={start['y']})",
                f"pyautogui.dragTo(x={end['x']}, y={end['y']}, button='left')"]
    if kind == "type":
        return [f"pyautogui.write(message={action['text']!r})"]
    if kind == "keypress":
        keys = action["keys"]
        return [f"pyautogui.hotkey({', '.join(repr(k) for k in keys)})" if len(keys) > 1
                else f"pyautogui.press({keys[0]!r})"]
    if kind == "scroll":
        sx, sy = action["scroll_x"], action["scroll_y"]
        if (sx == 0) == (sy == 0) or (sx or sy) % SCROLL_PIXELS_PER_NOTCH:
            raise ValueError(f"pyautogui scrolls whole notches along one axis: {action!r}")
        at = f", x={action['x']}, y={action['y']}" if "x" in action else ""
        if sy:
            return [f"pyautogui.scroll({-sy // SCROLL_PIXELS_PER_NOTCH}{at})"]
        return [f"pyautogui.hscroll({sx // SCROLL_PIXELS_PER_NOTCH}{at})"]
    raise ValueError(f"pyautogui has no call for {action!r}")
