"""The one validation step between a model's action and a display.

``plan(action, screen_size)`` turns an SDK action (modern ``computer_action`` or
legacy ``response_computer_tool_call`` model, or a plain dict) into a small typed
plan, checking *everything* first: coordinates against the screen, button names,
every key name, path length, text length and characters. A driver executes a plan
only after it was built, so a rejected action sends nothing at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cud.errors import ActionRejected, OutOfBounds, UnknownKey

from .keys import MAX_KEYS_PER_COMBO, keysym_for_char, keysym_for_name

__all__ = (
    "plan",
    "check_point",
    "Click",
    "Drag",
    "Move",
    "Scroll",
    "Keypress",
    "TypeText",
    "Wait",
    "Screenshot",
    "Plan",
    "BUTTONS",
    "SCROLL_PIXELS_PER_NOTCH",
    "MAX_TEXT_CHARS",
    "MAX_PATH_POINTS",
    "DOUBLE_CLICK_GAP_SECONDS",
    "BUTTON_HOLD_SECONDS",
    "RELEASE_SETTLE_SECONDS",
)

#: X button numbers; VNC button masks are ``1 << (n - 1)`` of the same numbers.
BUTTONS = {"left": 1, "wheel": 2, "right": 3, "back": 8, "forward": 9}
WHEEL_UP, WHEEL_DOWN, WHEEL_LEFT, WHEEL_RIGHT = 4, 5, 6, 7

#: One wheel notch per this many pixels of ``scroll_x``/``scroll_y`` (rounded half up, at
#: least one notch for any non-zero distance). Browsers and GTK scroll roughly 50-100 px a notch.
SCROLL_PIXELS_PER_NOTCH = 100
MAX_SCROLL_NOTCHES = 100
#: The longest text one ``type`` action may carry; longer text is refused, not cut.
MAX_TEXT_CHARS = 4096
MAX_PATH_POINTS = 1024
#: Pause between the release of a double click's first click and the second press.
#: Toolkits count a second press as a double click only if its server timestamp is
#: *later* than the first's (Chromium's ``IsRepeatedClickEvent`` refuses equal ones,
#: and two clicks sent back to back get the same millisecond) and within their
#: double-click time: xterm's multiClickTime 250 ms, GTK's and Qt's 400 ms, Chromium's
#: 500 ms. 50 ms is a brisk human double click and leaves room for delivery delays.
DOUBLE_CLICK_GAP_SECONDS = 0.05
#: How long a click holds its button down, and how long the pointer then stays where
#: it was released before the next pointer event. A window manager that focuses on
#: click (openbox, as in the sandbox) grabs the button and freezes the pointer until
#: it has replayed the press to the window: a release or motion sent in that moment
#: is delivered late, at wherever the pointer has gone by then (seen: 8-10 of 20 GTK
#: and Qt clicks released at the next action's point). And Chromium merges a release
#: with a motion queued right behind it (seen: 4 of 20 mouseups at the next point with
#: no gap, none with 1 ms). A person's click holds ~100 ms.
BUTTON_HOLD_SECONDS = 0.03
RELEASE_SETTLE_SECONDS = 0.03
Point = tuple[int, int]
Keysyms = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Click:
    x: int
    y: int
    button: int
    count: int
    keys: Keysyms


@dataclass(frozen=True, slots=True)
class Drag:
    path: tuple[Point, ...]
    keys: Keysyms


@dataclass(frozen=True, slots=True)
class Move:
    x: int
    y: int
    keys: Keysyms


@dataclass(frozen=True, slots=True)
class Scroll:
    x: int
    y: int
    #: (wheel button, notches) pairs, vertical first; empty for a zero scroll.
    wheel: tuple[tuple[int, int], ...]
    keys: Keysyms


@dataclass(frozen=True, slots=True)
class Keypress:
    keys: Keysyms
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TypeText:
    text: str
    keysyms: Keysyms


@dataclass(frozen=True, slots=True)
class Wait:
    pass


@dataclass(frozen=True, slots=True)
class Screenshot:
    pass


Plan = Click | Drag | Move | Scroll | Keypress | TypeText | Wait | Screenshot


def _get(action: Any, name: str) -> Any:
    if isinstance(action, dict):
        return action.get(name)
    return getattr(action, name, None)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionRejected(f"{what} must be an integer, got {value!r}", field=what, value=repr(value))
    return value


def check_point(x: Any, y: Any, size: tuple[int, int], what: str = "point") -> Point:
    """The one bounds check: (x, y) must be integers on a ``size`` screen."""
    x, y = _int(x, f"{what} x"), _int(y, f"{what} y")
    width, height = size
    if not (0 <= x < width and 0 <= y < height):
        raise OutOfBounds(
            f"{what} ({x}, {y}) is outside the {width}x{height} screen", x=x, y=y, width=width, height=height
        )
    return x, y


def _keys(value: Any, *, required: bool) -> tuple[Keysyms, tuple[str, ...]]:
    if value is None and not required:
        return (), ()
    if not isinstance(value, (list, tuple)) or (required and not value):
        raise ActionRejected(f"keys must be a non-empty list of key names, got {value!r}", keys=repr(value))
    if len(value) > MAX_KEYS_PER_COMBO:
        raise ActionRejected(f"too many keys at once ({len(value)} > {MAX_KEYS_PER_COMBO}): {value!r}", keys=value)
    names = tuple(value)
    return tuple(keysym_for_name(name) for name in names), names


def _notches(pixels: int, negative: int, positive: int) -> tuple[tuple[int, int], ...]:
    if pixels == 0:
        return ()
    # Half a notch rounds up (250 px is 3 notches), and any movement is at least one.
    count = max(1, (abs(pixels) + SCROLL_PIXELS_PER_NOTCH // 2) // SCROLL_PIXELS_PER_NOTCH)
    if count > MAX_SCROLL_NOTCHES:
        raise ActionRejected(
            f"scroll of {pixels} px is more than {MAX_SCROLL_NOTCHES} wheel notches", pixels=pixels
        )
    return ((positive if pixels > 0 else negative, count),)


def _text(value: Any) -> TypeText:
    if not isinstance(value, str):
        raise ActionRejected(f"text must be a string, got {value!r}", text=repr(value))
    if len(value) > MAX_TEXT_CHARS:
        raise ActionRejected(
            f"text of {len(value)} characters is longer than the {MAX_TEXT_CHARS} a type action may carry",
            length=len(value),
        )
    # "\r\n" is one line break, not two.
    text = value.replace("\r\n", "\n")
    keysyms = []
    for index, char in enumerate(text):
        try:
            keysyms.append(keysym_for_char(char))
        except UnknownKey as exc:
            raise UnknownKey(f"{exc.message} at index {index} of the text", char=char, index=index) from None
    return TypeText(text, tuple(keysyms))


def plan(action: Any, size: tuple[int, int]) -> Plan:
    """Validate ``action`` completely against a ``size`` screen and return what to do."""
    kind = _get(action, "type")
    if kind == "click":
        button = _get(action, "button")
        if button not in BUTTONS:
            raise ActionRejected(f"unknown mouse button {button!r}", button=repr(button))
        x, y = check_point(_get(action, "x"), _get(action, "y"), size, "click")
        return Click(x, y, BUTTONS[button], 1, _keys(_get(action, "keys"), required=False)[0])
    if kind == "double_click":
        x, y = check_point(_get(action, "x"), _get(action, "y"), size, "double_click")
        return Click(x, y, BUTTONS["left"], 2, _keys(_get(action, "keys"), required=False)[0])
    if kind == "move":
        x, y = check_point(_get(action, "x"), _get(action, "y"), size, "move")
        return Move(x, y, _keys(_get(action, "keys"), required=False)[0])
    if kind == "drag":
        path = _get(action, "path")
        if not isinstance(path, (list, tuple)) or len(path) < 2:
            raise ActionRejected(f"drag path needs at least 2 points, got {path!r}", path=repr(path))
        if len(path) > MAX_PATH_POINTS:
            raise ActionRejected(f"drag path of {len(path)} points exceeds {MAX_PATH_POINTS}", points=len(path))
        points = tuple(
            check_point(_get(p, "x"), _get(p, "y"), size, f"drag path point {i}") for i, p in enumerate(path)
        )
        return Drag(points, _keys(_get(action, "keys"), required=False)[0])
    if kind == "scroll":
        x, y = check_point(_get(action, "x"), _get(action, "y"), size, "scroll")
        dx = _int(_get(action, "scroll_x"), "scroll_x")
        dy = _int(_get(action, "scroll_y"), "scroll_y")
        wheel = _notches(dy, WHEEL_UP, WHEEL_DOWN) + _notches(dx, WHEEL_LEFT, WHEEL_RIGHT)
        return Scroll(x, y, wheel, _keys(_get(action, "keys"), required=False)[0])
    if kind == "keypress":
        keysyms, names = _keys(_get(action, "keys"), required=True)
        return Keypress(keysyms, names)
    if kind == "type":
        return _text(_get(action, "text"))
    if kind == "wait":
        return Wait()
    if kind == "screenshot":
        return Screenshot()
    raise ActionRejected(f"unknown action type {kind!r}", type=repr(kind))
