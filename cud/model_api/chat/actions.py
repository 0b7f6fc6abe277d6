"""What every chat format does with a parsed call: the protocol's action dicts at native pixels, the
request's image parts, and the one refusal of an answer that does not parse.

Coordinates: a model's number is a position in its space; position ``c`` lies in model pixel
``floor(c)``, which :meth:`ScreenScale.to_screen` checks and maps to the native pixel under its
centre. Whole numbers (what the models write) are that pixel itself. The references keep the float
and scale it (``c * W / w``); the native pixel cud picks is within one scale factor of theirs.

Keys: names are checked with :mod:`cud.drivers.keys` (the one key table, which knows pyautogui's
and xdotool's names) and kept as the model wrote them, as the anthropic adapter does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cud.drivers.actions import SCROLL_PIXELS_PER_NOTCH
from cud.drivers.keys import keysym_for_name
from cud.errors import ComputerUseFailed, OutOfBounds, UnknownKey
from cud.model_api.chat import Turn
from cud.model_api.scaling import ScreenScale, png_base64

__all__ = ("DIRECTIONS", "QUOTE_CHARS", "click", "double_click", "drag", "image_part", "keypress", "model_point",
           "move", "out_of_bounds", "quote", "scroll", "text_part", "type_text", "unparsed", "wait")

#: How much of the model's text an error quotes (its start and its end when longer).
QUOTE_CHARS = 400
#: direction -> (sign of scroll_x, sign of scroll_y): a positive scroll_y scrolls down.
DIRECTIONS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def quote(text: str) -> str:
    """``text`` for an error message: whole when short, else its start and end around a count of what was left out."""
    if len(text) <= QUOTE_CHARS:
        return repr(text)
    half = QUOTE_CHARS // 2
    return f"{text[:half]!r} ... ({len(text) - 2 * half} characters) ... {text[-half:]!r}"


def unparsed(fmt: str, text: str, why: str) -> ComputerUseFailed:
    """The error for an answer of format ``fmt`` that is no action: it says ``why`` and quotes ``text``."""
    return ComputerUseFailed(f"the model's {fmt} answer {why}; nothing was run. The answer: {quote(text)}",
                             format=fmt, answer=text[:QUOTE_CHARS])


def model_point(space: ScreenScale, x: object, y: object, what: str) -> tuple[int, int]:
    """The native pixel of the model's position ``(x, y)`` (ints or floats, in its space)."""
    return space.to_screen(_pixel(x), _pixel(y), what)


def _pixel(value: object) -> object:
    # A float position lies in the pixel floor(value); anything else (bool, str, nan) goes on to
    # to_screen, which names it. bool is an int subclass and no coordinate.
    if isinstance(value, float) and math.isfinite(value):
        return math.floor(value)
    if isinstance(value, bool):
        return repr(value)
    return value


def click(space: ScreenScale, x: object, y: object, button: str, what: str) -> dict[str, Any]:
    px, py = model_point(space, x, y, what)
    return {"type": "click", "x": px, "y": py, "button": button}


def double_click(space: ScreenScale, x: object, y: object, what: str) -> dict[str, Any]:
    px, py = model_point(space, x, y, what)
    return {"type": "double_click", "x": px, "y": py}


def move(space: ScreenScale, x: object, y: object, what: str) -> dict[str, Any]:
    px, py = model_point(space, x, y, what)
    return {"type": "move", "x": px, "y": py}


def drag(space: ScreenScale, points: Sequence[tuple[object, object]], what: str) -> dict[str, Any]:
    path = [model_point(space, x, y, f"{what} point {n + 1}") for n, (x, y) in enumerate(points)]
    return {"type": "drag", "path": [{"x": x, "y": y} for x, y in path]}


def scroll(space: ScreenScale, x: object, y: object, direction: str, notches: int, what: str) -> dict[str, Any]:
    """A scroll of ``notches`` wheel clicks towards ``direction`` (one of :data:`DIRECTIONS`)."""
    px, py = model_point(space, x, y, what)
    sign_x, sign_y = DIRECTIONS[direction]
    return {"type": "scroll", "x": px, "y": py, "scroll_x": sign_x * notches * SCROLL_PIXELS_PER_NOTCH,
            "scroll_y": sign_y * notches * SCROLL_PIXELS_PER_NOTCH}


def keypress(keys: Sequence[str], what: str) -> dict[str, Any]:
    """One chord, every key checked (UnknownKey naming the key and the model's ``what``)."""
    if not keys:
        raise ComputerUseFailed(f"the model's {what} names no key", what=what)
    for key in keys:
        try:
            keysym_for_name(key)
        except UnknownKey:
            raise UnknownKey(f"the model's {what} names an unknown key {key!r}", key=key) from None
    return {"type": "keypress", "keys": list(keys)}


def type_text(text: str) -> dict[str, Any]:
    return {"type": "type", "text": text}


def wait() -> dict[str, Any]:
    return {"type": "wait"}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_part(png: bytes) -> dict[str, Any]:
    """A screenshot as an OpenAI chat message part (a PNG data URL)."""
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + png_base64(png)}}


def past_turns(past: Sequence[Turn], history: int) -> list[dict[str, Any]]:
    """The last ``history`` turns as messages: each one's screenshot, when kept, as the user's, then its answer as
    the assistant's (UI-TARS's and Qwen's agents both replay their runs so)."""
    messages: list[dict[str, Any]] = []
    for turn in past[-history:] if history else ():
        if turn.screenshot is not None:
            messages.append({"role": "user", "content": [image_part(turn.screenshot)]})
        messages.append({"role": "assistant", "content": turn.text})
    return messages


def out_of_bounds(what: str, value: object) -> OutOfBounds:
    """A coordinate that is not even a pair of numbers."""
    return OutOfBounds(f"{what} {value!r} is not a point (x, y) of the model's screen; nothing was run",
                       value=repr(value))
