"""Actions drawn over the screenshot the model acted on: inline SVG in screenshot pixels.

The SVG's viewBox is the image's own size, so an action's x/y (the model's
coordinates on that screenshot) land where the model aimed whatever size the
page shows the image at. Each mark carries the action's number in the step, so
several actions of one batch stay apart. Keyboard actions have no place on the
screen; they become captions under it (:func:`captions`).

Everything from the model is data: numbers are checked to be finite before
they reach an attribute, and text is HTML-escaped.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from cud.phrases.actions import point

__all__ = ("captions", "svg_overlay")

_POINTER = "#e0245e"
_MOVE = "#1d6fe0"
#: What a person did while the task was paused (``act``), apart from the model's actions.
_HUMAN = "#10893e"


def svg_overlay(actions: list[dict[str, Any]], width: int, height: int) -> str:
    """An ``<svg>`` covering the image, with one mark per pointer action ('' if there is none)."""
    size = max(16.0, width / 50)  # label size in image pixels: ~26 px on a 1280-wide screen
    marks: list[str] = []
    for number, entry in enumerate(actions, start=1):
        action = entry.get("action") if isinstance(entry, dict) else None
        if isinstance(action, dict):
            marks.append(_mark(number, action, size, width, _HUMAN if _human(entry) else None))
    marks = [m for m in marks if m]
    if not marks:
        return ""
    return (
        f'<svg class="overlay" viewBox="0 0 {width} {height}" preserveAspectRatio="none" '
        f'aria-hidden="true">{"".join(marks)}</svg>'
    )


def _human(entry: dict[str, Any]) -> str | None:
    """The name of the person who did this action, or None for the model's own."""
    by = entry.get("by")
    return str(by.get("name", "?")) if isinstance(by, dict) else None


def _mark(number: int, action: dict[str, Any], size: float, width: int, colour: str | None) -> str:
    pointer, move = colour or _POINTER, colour or _MOVE
    kind = action.get("type")
    if kind in ("click", "double_click"):
        where = point(action)
        if where is None:
            return ""
        x, y = where
        r = size * 0.8
        rings = _circle(x, y, r, pointer) + _cross(x, y, r * 0.5, pointer)
        if kind == "double_click":
            rings += _circle(x, y, r * 1.45, pointer)
            label = f"{number} double-click"
        else:
            label = f"{number} {action.get('button', 'left')} click"
        return f'<g class="mark click">{rings}{_label(x, r * 1.6, y - r * 0.6, label, size, pointer, width)}</g>'
    if kind == "move":
        where = point(action)
        if where is None:
            return ""
        x, y = where
        return (f'<g class="mark move">{_circle(x, y, size * 0.45, move, dashed=True)}'
                f'{_label(x, size, y - size * 0.4, f"{number} move", size, move, width)}</g>')
    if kind == "scroll":
        return _scroll(number, action, size, width, pointer)
    if kind == "drag":
        return _drag(number, action, size, width, pointer)
    return ""


def _scroll(number: int, action: dict[str, Any], size: float, width: int, pointer: str) -> str:
    where = point(action)
    if where is None:
        return ""
    x, y = where
    dx, dy = _finite(action.get("scroll_x")), _finite(action.get("scroll_y"))
    length = math.hypot(dx, dy)
    parts = [_circle(x, y, size * 0.35, pointer)]
    if length:
        reach = size * 3.5
        ex, ey = x + dx / length * reach, y + dy / length * reach
        parts.append(_line([(x, y), (ex, ey)], pointer) + _arrowhead((x, y), (ex, ey), size, pointer))
    label = f"{number} scroll {dx:g},{dy:g}"
    return f'<g class="mark scroll">{"".join(parts)}{_label(x, size, y + size * 1.4, label, size, pointer, width)}</g>'


def _drag(number: int, action: dict[str, Any], size: float, width: int, pointer: str) -> str:
    raw = action.get("path")
    points = [p for p in (point(q) for q in raw) if p is not None] if isinstance(raw, list) else []
    if not points:
        return ""
    parts = [_circle(*points[0], size * 0.35, pointer)]
    if len(points) > 1:
        parts.append(_line(points, pointer) + _arrowhead(points[-2], points[-1], size, pointer))
    x, y = points[0]
    label = _label(x, size, y - size * 0.6, f"{number} drag", size, pointer, width)
    return f'<g class="mark drag">{"".join(parts)}{label}</g>'


def captions(actions: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(action number, kind, text) for the actions that have no place on the screen: typing and keys."""
    out: list[tuple[int, str, str]] = []
    for number, entry in enumerate(actions, start=1):
        action = entry.get("action") if isinstance(entry, dict) else None
        if not isinstance(action, dict):
            continue
        person = _human(entry)
        by = f" by {person}" if person else ""
        if action.get("type") == "type":
            out.append((number, f"typed{by}", str(action.get("text", ""))))
        elif action.get("type") == "keypress":
            keys = action.get("keys")
            out.append((number, f"keys{by}", "+".join(map(str, keys)) if isinstance(keys, list) else repr(keys)))
        elif action.get("type") == "wait":
            out.append((number, "waited", ""))
    return out


# -- primitives (numbers only; every value is formatted from a float) ----------------------
def _finite(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return 0.0


def _n(value: float) -> str:
    return f"{value:.1f}"


def _circle(x: float, y: float, r: float, colour: str, *, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    return (f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}" fill="none" stroke="#fff" stroke-width="5" '
            f'vector-effect="non-scaling-stroke"/>'
            f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(r)}" fill="none" stroke="{colour}" stroke-width="2.5" '
            f'vector-effect="non-scaling-stroke"{dash}/>')


def _cross(x: float, y: float, r: float, colour: str) -> str:
    return (f'<path d="M{_n(x - r)} {_n(y)}H{_n(x + r)}M{_n(x)} {_n(y - r)}V{_n(y + r)}" stroke="{colour}" '
            f'stroke-width="1.5" vector-effect="non-scaling-stroke"/>')


def _line(points: list[tuple[float, float]], colour: str) -> str:
    coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
    return (f'<polyline points="{coords}" fill="none" stroke="#fff" stroke-width="6" stroke-linejoin="round" '
            f'vector-effect="non-scaling-stroke"/>'
            f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="3" stroke-linejoin="round" '
            f'vector-effect="non-scaling-stroke"/>')


def _arrowhead(start: tuple[float, float], end: tuple[float, float], size: float, colour: str) -> str:
    (x0, y0), (x1, y1) = start, end
    length = math.hypot(x1 - x0, y1 - y0)
    if not length:
        return ""
    ux, uy = (x1 - x0) / length, (y1 - y0) / length
    back, half = size * 0.9, size * 0.45
    left = (x1 - ux * back - uy * half, y1 - uy * back + ux * half)
    right = (x1 - ux * back + uy * half, y1 - uy * back - ux * half)
    coords = " ".join(f"{_n(px)},{_n(py)}" for px, py in ((x1, y1), left, right))
    return f'<polygon points="{coords}" fill="{colour}" stroke="#fff" stroke-width="1" vector-effect="non-scaling-stroke"/>'


def _label(x: float, offset: float, y: float, text: str, size: float, colour: str, width: int) -> str:
    """``text`` beside the mark at ``x``: to its right, or to its left where it would leave the image."""
    anchor = ""
    if x + offset + len(text) * size * 0.62 > width:
        x, anchor = x - offset, ' text-anchor="end"'
    else:
        x += offset
    y = max(y, size)  # never above the top edge
    return (f'<text x="{_n(x)}" y="{_n(y)}"{anchor} font-size="{_n(size)}" fill="{colour}" stroke="#fff" '
            f'stroke-width="{_n(size / 4)}" paint-order="stroke" font-family="sans-serif" '
            f'font-weight="bold">{escape(text)}</text>')
