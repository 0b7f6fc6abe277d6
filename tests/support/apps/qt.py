"""Qt 5 (PyQt5 on xcb, under the system's Python): ``qt_probe.py`` reporting through files."""

from __future__ import annotations

from .reporting import ReportingApp

__all__ = ("APP", "QtApp")


class QtApp(ReportingApp):
    name = "qt"
    probe = "qt_probe.py"
    capabilities = frozenset({"buttons", "back_forward", "dblclick", "drag_select", "dnd", "scroll", "keys", "type",
                              "type_newline"})


APP = QtApp
