"""GTK 3 (PyGObject, under the system's Python): ``gtk_probe.py`` reporting through files."""

from __future__ import annotations

from .reporting import ReportingApp

__all__ = ("APP", "GtkApp")


class GtkApp(ReportingApp):
    name = "gtk"
    probe = "gtk_probe.py"
    capabilities = frozenset({"buttons", "back_forward", "dblclick", "drag_select", "dnd", "scroll", "keys", "type",
                              "type_newline"})


APP = GtkApp
