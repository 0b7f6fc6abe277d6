"""An action, and an approval's question, in one line for people: ``click "OK" (push button) in … at (530, 191)``.

The daemon words its approvals, its stuck guard's reasons and its hooks' messages with these;
cuctl, the console and the report show the same phrases. What an action touches is worded by
:mod:`cud.phrases.targets`.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

from cud.phrases.targets import target_phrase
from cud.phrases.text import cut
from cud.protocol.request_checks import AT_POINT_ACTIONS

__all__ = ("describe", "describe_action", "describe_approval", "point")


def point(holder: Any) -> tuple[float, float] | None:
    """(x, y) of an action or path point if both are finite numbers (model data is not trusted)."""
    if not isinstance(holder, dict):
        return None
    x, y = holder.get("x"), holder.get("y")
    if _number(x) and _number(y):
        return float(x), float(y)
    return None


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _at(p: tuple[float, float] | None) -> str:
    return "?" if p is None else f"({p[0]:g}, {p[1]:g})"


def describe(action: Any, limit: int = 80) -> str:
    """One short human phrase for an action: ``click left at (200, 150)``, ``type "hello"``."""
    if not isinstance(action, dict):
        return cut(repr(action), limit)
    kind = str(action.get("type", "?"))
    if kind == "click":
        return f"click {action.get('button', 'left')} at {_at(point(action))}"
    if kind == "double_click":
        return f"double-click at {_at(point(action))}"
    if kind == "move":
        return f"move to {_at(point(action))}"
    if kind == "scroll":
        return f"scroll ({action.get('scroll_x', 0)}, {action.get('scroll_y', 0)}) at {_at(point(action))}"
    if kind == "drag":
        path = action.get("path") if isinstance(action.get("path"), list) else []
        if not path:
            return "drag (no path)"
        return f"drag {_at(point(path[0]))} → {_at(point(path[-1]))} ({len(path)} points)"
    if kind == "type":
        return f"type {cut(str(action.get('text', '')), limit)!r}"
    if kind == "keypress":
        keys = action.get("keys")
        return "press " + ("+".join(str(k) for k in keys) if isinstance(keys, list) else repr(keys))
    if kind == "wait":
        return "wait"
    if kind == "screenshot":
        return "screenshot"
    return cut(f"{kind}: {action!r}", limit)


def describe_action(action: Any, target: dict[str, Any] | None, limit: int = 80) -> str:
    """The action's phrase (:func:`describe`) with what it touches."""
    base = describe(action, limit)
    phrase = target_phrase(target)
    if not phrase or not isinstance(action, dict):
        return base
    kind = action.get("type")
    if kind in AT_POINT_ACTIONS and " at " in base:
        verb, where = base.rsplit(" at ", 1)
        if kind == "click" and verb == "click left":
            verb = "click"
        return f"{verb} {phrase} at {where}"
    if kind == "drag":
        return f"{base} from {phrase}"
    if kind == "type":
        return f"{base} into {phrase}"
    if kind == "keypress":
        return f"{base} in {phrase}"
    return base


def describe_approval(checks: list[dict[str, Any]], actions: list[Any], targets: list[Any] | None,
                      limit: int = 80) -> str:
    """What an approval asks, in one line: why (its checks), then what (its actions with what they touch).

    ``The model is about to type into the focused window: type 'hi' into "Search" (entry) in …``.
    A check's message is a sentence of its own; its closing stop is left out, so that the ':'
    before the actions (or the ';' between checks) does not follow it. ``limit``: each action's.
    """
    reasons = "; ".join(" ".join(str(c.get("message") or c.get("code") or "?").split()).rstrip(" .;:")
                        for c in checks)
    targets = targets or [None] * len(actions)
    what = ", ".join(describe_action(a, t, limit) for a, t in zip(actions, targets, strict=False))
    return f"{reasons}: {what}" if reasons and what else reasons or what
