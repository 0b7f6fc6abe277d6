"""Say in words what an action touches: the phrase cuctl approvals, follow, the console and the report show.

(Words only: finding what an action touches is the daemon's, in ``daemon/targets/``.)

:func:`cud.phrases.actions.describe_action` puts it into the action's own phrase:

``click "Delete account" (push button) in "Settings – Chromium" (chromium, pid 4121) at (530, 191)``

Names and titles come from applications (and so, in effect, from whatever the
model put on the screen): they are shown without control characters and cut to
a readable length.
"""

from __future__ import annotations

from typing import Any

from cud.phrases.text import cut, printable

__all__ = ("identity", "identity_phrase", "target_phrase")

#: Longest element name or window title shown; the rest becomes "…".
NAME_LIMIT = 60


def _quoted(text: Any) -> str:
    return '"' + cut(printable(str(text)), NAME_LIMIT).replace('"', "'") + '"'


def _element(element: dict[str, Any]) -> str:
    role = printable(str(element.get("role") or "element"))
    name = element.get("name")
    return f"{_quoted(name)} ({role})" if name else f"a {role}"


def _window(window: dict[str, Any]) -> str:
    title = _quoted(window.get("title") or "untitled")
    who = printable(str(window.get("process") or window.get("instance") or window.get("class") or "?"))
    pid = window.get("pid")
    return f"{title} ({who}, pid {pid})" if pid else f"{title} ({who})"


def target_phrase(target: dict[str, Any] | None) -> str:
    """``"Delete account" (push button) in "Settings – Chromium" (chromium, pid 4121)``; "" for no target."""
    if not isinstance(target, dict):
        return ""
    element, window = target.get("element"), target.get("window")
    if isinstance(element, dict) and isinstance(window, dict):
        return f"{_element(element)} in {_window(window)}"
    if isinstance(window, dict):
        return f"the window {_window(window)}"
    if isinstance(element, dict):
        app = element.get("application")
        return f"{_element(element)} in {_quoted(app)}" if app else _element(element)
    note = str(target.get("note") or "")
    return "unknown (VNC)" if note.startswith("unknown (VNC)") else "an unknown target"


def identity(target: dict[str, Any] | None) -> dict[str, str] | None:
    """What an approval binds an element by: role, name and application; None if no element is known."""
    element = target.get("element") if isinstance(target, dict) else None
    if not isinstance(element, dict):
        return None
    return {"role": str(element.get("role") or ""), "name": str(element.get("name") or ""),
            "application": str(element.get("application") or "")}


def identity_phrase(ident: dict[str, str]) -> str:
    name = _quoted(ident["name"]) if ident["name"] else "an unnamed"
    return f"{name} ({printable(ident['role'])}) of {_quoted(ident['application'])}"
