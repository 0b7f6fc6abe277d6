"""What the chat formats' tests share: the screens, the generated protocol actions, their mapping."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import strategies as st
from PIL import Image

from cud.model_api.scaling import ScreenScale

#: Common screens and odd ones (an odd width and height, a 4K one the formats scale down).
SCREENS = [(1920, 1080), (1366, 768), (1279, 801), (3840, 2160)]
#: Key names every format's grammar writes alike (pyautogui's and UI-TARS's names).
KEYS = ["ctrl", "shift", "alt", "enter", "a", "c", "v", "tab", "pagedown", "f5", "esc", "win", "backspace", "up"]
# Coordinates are drawn large and folded into the model's space (in_space) once the screen is known.
_coord = st.integers(0, 10**4)


def actions(*, scroll_steps: list[tuple[int, int]], move: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Protocol actions a format can write (``scroll_steps``: the (scroll_x, scroll_y) it can say)."""
    kinds = [
        st.builds(lambda x, y, b: {"type": "click", "x": x, "y": y, "button": b}, _coord, _coord,
                  st.sampled_from(["left", "right"])),
        st.builds(lambda x, y: {"type": "double_click", "x": x, "y": y}, _coord, _coord),
        st.builds(lambda a, b, c, d: {"type": "drag", "path": [{"x": a, "y": b}, {"x": c, "y": d}]},
                  _coord, _coord, _coord, _coord),
        st.builds(lambda x, y, d: {"type": "scroll", "x": x, "y": y, "scroll_x": d[0], "scroll_y": d[1]},
                  _coord, _coord, st.sampled_from(scroll_steps)),
        st.builds(lambda k: {"type": "keypress", "keys": k}, st.lists(st.sampled_from(KEYS), min_size=1, max_size=3)),
        st.builds(lambda t: {"type": "type", "text": t},
                  st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)),
        st.just({"type": "wait"}),
    ]
    if move:
        kinds.append(st.builds(lambda x, y: {"type": "move", "x": x, "y": y}, _coord, _coord))
    return st.one_of(kinds)


def in_space(action: dict[str, Any], space: ScreenScale) -> dict[str, Any]:
    """``action`` with its generated coordinates folded into the model's space."""
    def fold(point: dict[str, int]) -> dict[str, int]:
        return {"x": point["x"] % space.model_width, "y": point["y"] % space.model_height}
    if "path" in action:
        return {**action, "path": [fold(point) for point in action["path"]]}
    if "x" in action:
        return {**action, **fold(action)}
    return action


def native(action: dict[str, Any], space: ScreenScale) -> dict[str, Any]:
    """``action`` (in the model's space) at native pixels, as parse must give it back."""
    def screen(point: dict[str, int]) -> dict[str, int]:
        x, y = space.to_screen(point["x"], point["y"], "generated point")
        return {"x": x, "y": y}
    if "path" in action:
        return {**action, "path": [screen(point) for point in action["path"]]}
    if "x" in action:
        return {**action, **screen(action)}
    return action


def near(ours: int, theirs: float, scale: float) -> bool:
    """cud maps a model pixel to the native pixel under its centre, the references its corner (a float,
    or that truncated): they differ by less than one model pixel's width on the screen, and one pixel."""
    return abs(ours - theirs) < max(1.0, scale) + 1.01


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, format="PNG")
    return out.getvalue()
