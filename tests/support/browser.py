"""Debian's Chromium driven by Playwright: what a page logs, throws and requests, and what it shows.

Playwright's Python package brings its own driver; the browser is the system's
``/usr/bin/chromium`` (``executable_path``), so nothing is downloaded and the
tests see the Chromium a user of this machine has. The browser gets a fresh
profile, no display and a HOME of its own, and runs headless.

:class:`Watched` is a page whose every console message, uncaught exception,
request and failed request is kept from the moment it opens, so a test can say
"no console errors, no request leaving the page's origin" and mean every one.
A control test (tests/test_report.py) proves those lists fill up when a page
does misbehave.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.sync_api import Browser as _Browser
from playwright.sync_api import ConsoleMessage, Page, Playwright, Request, sync_playwright

__all__ = ("CHROMIUM", "Browser", "PageReport", "Watched")

CHROMIUM = os.environ.get("CUD_TEST_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--disable-gpu", "--disable-quic", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage", "--disable-features=Translate,OptimizationHints,MediaRouter",
        "--hide-scrollbars", "--mute-audio", "--no-first-run", "--no-default-browser-check"]

#: Resolves once every image in the window (lazy ones below it excepted) is decoded.
_SHOWN_IMAGES_DECODED = """Promise.all([...document.images]
  .filter(i => i.loading !== "lazy" || i.getBoundingClientRect().top < innerHeight)
  .map(i => i.decode().catch(() => null)))"""


@dataclass
class PageReport:
    console: list[tuple[str, str]] = field(default_factory=list)  # (type, text) of each console message
    errors: list[str] = field(default_factory=list)  # uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, in order
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, failure) of requests that failed
    value: Any = None  # what a probe script returned
    screenshot: bytes = b""  # PNG

    def problems(self, *, allow: tuple[str, ...] = ()) -> list[str]:
        """Console errors and warnings, exceptions and failed loads, as text; ``allow``: substrings to let pass."""
        out = [f"console.{kind}: {text}" for kind, text in self.console if kind in ("error", "warning", "assert")]
        out += [f"exception: {e}" for e in self.errors]
        out += [f"load failed: {url} {why}" for url, why in self.failed]
        return [p for p in out if not any(a in p for a in allow)]

    def foreign(self, origin: str) -> list[str]:
        """Requests that left ``origin`` (``scheme://host:port``); data: and blob: URLs stay in the page."""
        def own(url: str) -> bool:
            parts = urlsplit(url)
            return parts.scheme in ("data", "blob") or f"{parts.scheme}://{parts.netloc}" == origin
        return [u for u in self.requests if not own(u)]


class Watched:
    """A page in a context of its own, watched from before its first request."""

    def __init__(self, browser: _Browser, width: int, height: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
        self.page: Page = self.context.new_page()
        self.report = PageReport()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.report.errors.append(str(error)))
        self.page.on("request", lambda request: self.report.requests.append(request.url))
        self.page.on("requestfailed", self._failed)

    def _console(self, message: ConsoleMessage) -> None:
        self.report.console.append((message.type, message.text))

    def _failed(self, request: Request) -> None:
        # A page that goes away ends its long requests (an event stream): that is not a failure of the page.
        why = request.failure or "?"
        if "ERR_ABORTED" not in why:
            self.report.failed.append((request.url, why))

    def close(self) -> None:
        self.context.close()


class Browser:
    def __init__(self, workdir: Path) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="chromium-home-", dir=workdir))
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env["HOME"] = str(self.home)  # nothing lands in the real home
        self._playwright: Playwright = sync_playwright().start()
        try:
            self.browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, env=env,
                                                            headless=True, timeout=60_000)
        except BaseException:
            self._playwright.stop()
            raise

    def open(self, url: str, *, width: int = 1280, height: int = 900) -> Watched:
        watched = Watched(self.browser, width, height)
        watched.page.goto(url, wait_until="load")
        return watched

    def inspect(self, url: str, probe: str, *, width: int = 1280, height: int = 900,
                screenshot_height: int | None = None) -> PageReport:
        """Load ``url``; run ``probe`` (a JS expression, may be a promise); screenshot it; close it."""
        watched = self.open(url, width=width, height=height)
        try:
            watched.report.value = watched.page.evaluate(probe)
            watched.page.evaluate("window.scrollTo(0, 0)")
            if screenshot_height:
                # A taller window, as a person with a tall screen would see it: lazy images in it load.
                watched.page.set_viewport_size({"width": width, "height": screenshot_height})
                watched.page.evaluate(_SHOWN_IMAGES_DECODED)
            watched.report.screenshot = watched.page.screenshot()
            return watched.report
        finally:
            watched.close()

    def close(self) -> None:
        try:
            self.browser.close()  # Playwright ends the browser's process group and reaps it
        finally:
            self._playwright.stop()  # and its driver process
            shutil.rmtree(self.home, ignore_errors=True)
