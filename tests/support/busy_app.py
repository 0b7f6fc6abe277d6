"""The stuck guard's tests' application: forms/busy_gtk.py (menus, an entry, a download, a long list
and a long document) on a desktop, reporting through the files of apps/reporting.py, its tree on an
accessibility bus when one is given."""

from __future__ import annotations

from pathlib import Path

from .a11y import A11yBus, a11y_env
from .apps.base import Rect
from .apps.reporting import SYSTEM_PYTHON, ReportingApp
from .desktop import Desktop
from .recorder import wait_until

__all__ = ("BusyApp",)

FORMS = Path(__file__).with_name("forms")


class BusyApp(ReportingApp):
    name = "busy-gtk"
    capabilities = frozenset()

    def __init__(self, desktop: Desktop, bus: A11yBus | None = None) -> None:
        super().__init__(desktop)
        self.bus = bus

    def app_env(self) -> dict[str, str]:
        return a11y_env(self.desktop, self.bus) if self.bus is not None else self.desktop.env

    def argv(self) -> list[str]:
        return [SYSTEM_PYTHON, str(FORMS / "busy_gtk.py")]

    def region(self, name: str) -> Rect:
        """A widget's screen rectangle: entry, download, still, list, doc, or menu:TITLE."""
        x, y, w, h = self._state()["regions"][name]
        return x, y, w, h

    def centre(self, name: str) -> tuple[int, int]:
        x, y, w, h = self.region(name)
        return x + w // 2, y + h // 2

    def reset(self) -> None:
        """Entry empty, list and document at the top, no menu open, no download, focus on Download; returns
        once that is painted, so that a task's first screenshot does not catch the window halfway."""
        state = self.command("reset")
        wait_until(lambda: self._state().get("painted", 0) >= state["resets"], 10, "the busy window to paint its reset")
