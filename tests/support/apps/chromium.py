"""Debian's Chromium, headed under openbox, showing a page that reports every DOM event it receives.

Chromium is started here (``Desktop.spawn``: the test owns its pid and stops its
whole process group) as a kiosk window covering the screen, so page (client)
coordinates are screen coordinates. Playwright attaches over the DevTools port
Chromium picked itself (loopback) only to read the page's record
(``chromium_page.html``) and to act on the page from its own side; no input goes
through it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from ..recorder import wait_until
from .base import App, Event, Rect

__all__ = ("APP", "ChromiumApp")

CHROMIUM = os.environ.get("CUD_TEST_CHROMIUM", "/usr/bin/chromium")
PAGE = Path(__file__).with_name("chromium_page.html")
FLAGS = [
    "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-gpu", "--no-sandbox", "--disable-dev-shm-usage",
    "--disable-features=Translate,MediaRouter,OptimizationHints", "--password-store=basic",
    # The "unsupported command-line flag" infobar would push the page down after it has been measured.
    "--test-type",
    # Wheel scrolling that is still animating would move the area after reset_scroll().
    "--disable-smooth-scrolling",
    "--force-device-scale-factor=1", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
]
#: Characters of the page's paragraph ("The quick brown fox jumps over the lazy dog") a drag selects.
SELECTION = (6, 18)  # "ck brown fox"


class ChromiumApp(App):
    name = "chromium"
    capabilities = frozenset({"buttons", "back_forward", "dblclick", "drag_select", "dnd", "scroll", "keys", "type",
                              "type_newline"})

    def start(self) -> None:
        desktop = self.desktop
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=desktop.workdir))
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        # HOME in the profile too: nothing (NSS database, caches) lands in the real home.
        env = {**desktop.env, "HOME": str(self.profile)}
        self.proc: subprocess.Popen[bytes] = desktop.spawn(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={desktop.width},{desktop.height}",
             "--window-position=0,0", "--kiosk", PAGE.as_uri()], "chromium.log", env=env)
        try:
            self._attach()
        except BaseException:
            self.stop()
            raise

    def _attach(self) -> None:
        port_file = self.profile / "DevToolsActivePort"
        port = wait_until(lambda: self._alive() and port_file.exists() and port_file.read_text().split("\n")[0],
                          60, "chromium to open its DevTools port")
        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{port}")
        self.page = wait_until(self._our_page, 30, f"chromium to show {PAGE.name}")
        # Kiosk goes full screen after the first map; measure only once the window has settled there.
        layout = wait_until(self._settled, 30, "chromium's page to cover the screen and have the focus")
        assert layout["geometry"][6] == 1, f"devicePixelRatio {layout['geometry'][6]}: page pixels are not native"
        self.pad = tuple(layout["pad"])
        self.field = tuple(layout["field"])
        self._drag, self._drop = layout["drag"], layout["drop"]

    def _our_page(self) -> Page | None:
        assert self._browser is not None
        for context in self._browser.contexts:
            for page in context.pages:
                if page.url == PAGE.as_uri() and page.evaluate("window.probe?.ready === true"):
                    return page
        return None

    def _settled(self) -> dict[str, Any] | None:
        """The page's layout once its viewport is the whole screen (client = screen) and it has the focus."""
        layout: dict[str, Any] = self._call("probe.layout()")
        size = [self.desktop.width, self.desktop.height]
        return layout if layout["geometry"][:6] == [0, 0, *size, *size] and layout["focused"] else None

    def _alive(self) -> bool:
        if self.proc.poll() is not None:
            log = (self.desktop.workdir / "chromium.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"chromium exited with {self.proc.returncode}; its log ends: {log}")
        return True

    def _call(self, expression: str) -> Any:
        self._alive()
        return self.page.evaluate(expression)

    def stop(self) -> None:
        # Playwright first, so its driver process and pipes are gone before the browser is.
        with contextlib.suppress(Exception):
            if self._browser is not None:
                self._browser.close()
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None
        self._stop_group()

    def _stop_group(self) -> None:
        """SIGTERM to chromium's process group (renderers, zygotes, utilities), then SIGKILL."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        # Whatever of the group outlived the browser process. Its pid stays reserved as a group id
        # while any member lives, so this reaches only chromium's own processes.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    # -- what the page saw --------------------------------------------------------------
    def events(self, since: int = 0) -> list[Event]:
        events: list[Event] = self._call(f"probe.events.slice({int(since)})")
        return events

    def mark(self) -> int:
        count: int = self._call("probe.events.length")
        return count

    def value(self) -> str:
        return str(self._call("document.getElementById('field').value"))

    def clear(self) -> None:
        self._call("probe.clear()")

    def selection(self) -> str:
        return str(self._call("probe.selection()"))

    def selection_drag(self) -> tuple[tuple[int, int], tuple[int, int], str]:
        start, end, text = self._call(f"probe.selectionDrag({SELECTION[0]}, {SELECTION[1]})")
        return (start[0], start[1]), (end[0], end[1]), text

    def dnd_regions(self) -> tuple[Rect, Rect]:
        """The draggable square and the drop zone."""
        return tuple(self._drag), tuple(self._drop)

    def scroll_position(self) -> tuple[int, int]:
        left, top = self._call("probe.scroll()")
        return int(left), int(top)

    def reset_scroll(self) -> None:
        self._call("probe.resetScroll()")


APP = ChromiumApp
