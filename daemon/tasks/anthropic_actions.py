"""Anthropic's computer-tool actions, as the protocol's action dicts every checkpoint and driver takes.

One tool call (``{"action": "left_click", "coordinate": [x, y], ...}``, in the model's scaled
pixels) becomes zero or more protocol actions at native pixels (:class:`Translated`). Every
coordinate is checked in the model's space first (:meth:`~cud.model_api.scaling.ScreenScale.to_screen`),
and every key name against the one key table (:mod:`cud.drivers.keys`, which resolves xdotool's
names: they are X keysym names), so a bad call is refused before any of its actions runs.

============================  =========================================================
Anthropic                     protocol
============================  =========================================================
left/right/middle_click       ``click`` with button left/right/wheel (``text``: keys held)
double_click                  ``double_click``
triple_click                  ``double_click`` then ``click`` at the same point
left_click_drag               ``drag`` from ``start_coordinate`` to ``coordinate``
left_mouse_down / up          held: the moves between become one ``drag`` at the release
mouse_move                    ``move`` (while the button is held: a point of that drag)
key ("ctrl+s", "a b")         one ``keypress`` per space-separated chord
type                          ``type``
scroll                        ``scroll`` of ``scroll_amount`` wheel notches in ``scroll_direction``
wait                          ``wait``
screenshot                    the screen, scaled (below)
zoom (computer_20251124)      the native region, fitted within the image limits
cursor_position               the last point the pointer was sent to, in the model's pixels
============================  =========================================================

``hold_key`` is refused (cud's drivers press a chord and release it; a key held across calls
has no protocol action), as is any action the tool version does not have.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.drivers.keys import keysym_for_name
from cud.errors import ComputerUseFailed, UnknownKey
from cud.model_api.scaling import ScreenScale

__all__ = ("Pointer", "Translated", "translate")

_BUTTONS = {"left_click": "left", "right_click": "right", "middle_click": "wheel"}
#: direction -> (sign of scroll_x, sign of scroll_y): a positive scroll_y scrolls down.
_DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
#: Actions only the 2025-11-24 tool has.
_NEWER = {"zoom"}
_UNSUPPORTED = {"hold_key": "a key held across calls has no action in cud's drivers (they press a chord and "
                            "release it); use key with a chord such as \"shift+Right\""}


@dataclasses.dataclass
class Pointer:
    """Where the pointer was last sent (native), and the points of a drag whose button is held."""

    at: tuple[int, int] | None = None
    held: list[tuple[int, int]] | None = None


@dataclasses.dataclass
class Translated:
    """What one tool call does: protocol ``actions`` run in order; then, for ``screenshot``/``zoom``,
    an image (``zoom``: of the native ``region``); ``text``: the tool result's words."""

    actions: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    screenshot: bool = False
    region: tuple[int, int, int, int] | None = None
    text: str | None = None


def translate(call: Any, scale: ScreenScale, pointer: Pointer, tool: str) -> Translated:
    """The protocol's actions for one computer-tool call; ComputerUseFailed quoting a call that is no action
    of ``tool``, OutOfBounds naming a coordinate off the model's screen, UnknownKey naming a key."""
    if not isinstance(call, dict) or not isinstance(call.get("action"), str):
        raise ComputerUseFailed(f"the model's computer call has no action: {call!r}", call=repr(call))
    name = call["action"]
    if name in _UNSUPPORTED:
        raise ComputerUseFailed(f"the model asked for {name!r} ({call!r}): {_UNSUPPORTED[name]}", action=name)
    if name in _NEWER and tool == "computer_20250124":
        raise ComputerUseFailed(f"the model asked for {name!r} ({call!r}), which tool {tool} does not have",
                                action=name)
    handler = _HANDLERS.get(name)
    if handler is None:
        raise ComputerUseFailed(f"the model asked for an unknown computer action {name!r}: {call!r}", action=name)
    return handler(call, scale, pointer)


def _point(call: dict[str, Any], key: str, scale: ScreenScale, pointer: Pointer, *, optional: bool = False) -> tuple[int, int]:
    value = call.get(key)
    if value is None and optional:
        if pointer.at is None:
            raise ComputerUseFailed(f"the model's {call['action']!r} has no coordinate and the pointer has not "
                                    f"been moved yet: {call!r}", action=call["action"])
        return pointer.at
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ComputerUseFailed(f"the model's {call['action']!r} needs {key} [x, y], got {value!r}",
                                action=call["action"], key=key)
    return scale.to_screen(value[0], value[1], f"{call['action']} {key}")


def _held_keys(call: dict[str, Any]) -> list[str]:
    """The modifier keys a click or scroll holds (``text``, e.g. "shift" or "ctrl+shift")."""
    text = call.get("text")
    if text is None or text == "":
        return []
    return _chord(text, call)


def _chord(text: object, call: dict[str, Any]) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        raise ComputerUseFailed(f"the model's {call['action']!r} needs keys as text, got {text!r}", action=call["action"])
    keys = text.strip().split("+")
    for key in keys:
        try:
            keysym_for_name(key)
        except UnknownKey:
            raise UnknownKey(f"the model's {call['action']!r} names an unknown key {key!r} (in {text!r})",
                             key=key) from None
    return keys


def _with_keys(action: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    return {**action, "keys": keys} if keys else action


def _click(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    x, y = _point(call, "coordinate", scale, pointer, optional=True)
    pointer.at = (x, y)
    keys = _held_keys(call)
    name = call["action"]
    if name == "double_click":
        return Translated([_with_keys({"type": "double_click", "x": x, "y": y}, keys)])
    if name == "triple_click":
        return Translated([_with_keys({"type": "double_click", "x": x, "y": y}, keys),
                           _with_keys({"type": "click", "x": x, "y": y, "button": "left"}, keys)])
    return Translated([_with_keys({"type": "click", "x": x, "y": y, "button": _BUTTONS[name]}, keys)])


def _drag(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    start = _point(call, "start_coordinate", scale, pointer, optional=True)
    end = _point(call, "coordinate", scale, pointer)
    pointer.at = end
    return Translated([{"type": "drag", "path": [{"x": start[0], "y": start[1]}, {"x": end[0], "y": end[1]}]}])


def _mouse_down(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    if pointer.held is not None:
        raise ComputerUseFailed(f"the model pressed the left button while it is held: {call!r}", action="left_mouse_down")
    start = _point(call, "coordinate", scale, pointer, optional=True)
    pointer.at, pointer.held = start, [start]
    return Translated(text="the left button is held; the pointer's moves until left_mouse_up run as one drag")


def _mouse_up(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    if pointer.held is None:
        raise ComputerUseFailed(f"the model released the left button, which is not held: {call!r}",
                                action="left_mouse_up")
    end = _point(call, "coordinate", scale, pointer, optional=True)
    path, pointer.held, pointer.at = [*pointer.held, end], None, end
    if len(path) == 2 and path[0] == path[1]:
        return Translated([{"type": "click", "x": end[0], "y": end[1], "button": "left"}])
    return Translated([{"type": "drag", "path": [{"x": x, "y": y} for x, y in path]}])


def _move(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    x, y = _point(call, "coordinate", scale, pointer)
    pointer.at = (x, y)
    if pointer.held is not None:
        pointer.held.append((x, y))
        return Translated(text="moved with the left button held (the drag runs at left_mouse_up)")
    return Translated([{"type": "move", "x": x, "y": y}])


def _key(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    text = call.get("text")
    if not isinstance(text, str) or not text.split():
        raise ComputerUseFailed(f"the model's 'key' needs text such as \"ctrl+s\", got {text!r}", action="key")
    return Translated([{"type": "keypress", "keys": _chord(chord, call)} for chord in text.split()])


def _type(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    text = call.get("text")
    if not isinstance(text, str):
        raise ComputerUseFailed(f"the model's 'type' needs text, got {text!r}", action="type")
    return Translated([{"type": "type", "text": text}])


def _scroll(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    x, y = _point(call, "coordinate", scale, pointer, optional=True)
    direction, amount = call.get("scroll_direction"), call.get("scroll_amount")
    if direction not in _DIRECTIONS:
        raise ComputerUseFailed(f"the model's scroll_direction {direction!r} is none of "
                                + ", ".join(repr(d) for d in _DIRECTIONS), action="scroll")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount < 0:
        raise ComputerUseFailed(f"the model's scroll_amount {amount!r} is no whole number of notches", action="scroll")
    pointer.at = (x, y)
    sign_x, sign_y = _DIRECTIONS[direction]
    # One notch of Anthropic's amount is one wheel click: the driver's notch is this many pixels.
    action = {"type": "scroll", "x": x, "y": y, "scroll_x": sign_x * amount * SCROLL_PIXELS_PER_NOTCH,
              "scroll_y": sign_y * amount * SCROLL_PIXELS_PER_NOTCH}
    return Translated([_with_keys(action, _held_keys(call))])


def _wait(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    return Translated([{"type": "wait"}], screenshot=True)


def _screenshot(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    return Translated(screenshot=True)


def _zoom(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    region = call.get("region")
    if not isinstance(region, (list, tuple)) or len(region) != 4:
        raise ComputerUseFailed(f"the model's 'zoom' needs region [x0, y0, x1, y1], got {region!r}", action="zoom")
    left, top = scale.to_screen(region[0], region[1], "zoom region's top left")
    right, bottom = scale.to_screen(region[2], region[3], "zoom region's bottom right")
    if right < left or bottom < top:
        raise ComputerUseFailed(f"the model's zoom region {region!r} is empty", action="zoom")
    return Translated(region=(left, top, right + 1, bottom + 1))


def _cursor(call: dict[str, Any], scale: ScreenScale, pointer: Pointer) -> Translated:
    if pointer.at is None:
        return Translated(text="the pointer has not been moved in this task yet")
    x, y = scale.to_model(*pointer.at)
    return Translated(text=f"X={x},Y={y}")


_HANDLERS = {
    "left_click": _click, "right_click": _click, "middle_click": _click, "double_click": _click,
    "triple_click": _click, "left_click_drag": _drag, "left_mouse_down": _mouse_down, "left_mouse_up": _mouse_up,
    "mouse_move": _move, "key": _key, "type": _type, "scroll": _scroll, "wait": _wait,
    "screenshot": _screenshot, "zoom": _zoom, "cursor_position": _cursor,
}
