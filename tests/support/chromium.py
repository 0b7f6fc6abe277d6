"""Headless Chromium driven over the DevTools protocol on a pipe: what a page logs, fetches and shows.

``--remote-debugging-pipe`` makes Chromium read CDP commands from fd 3 and
write replies and events to fd 4, NUL-separated JSON: no TCP port, no
websocket library, nothing else listening. The browser runs in its own process
group with a fresh profile and every background service off, and is stopped
by its pid (SIGTERM to its group, then SIGKILL).

:meth:`Chromium.inspect` loads a page and returns every console message,
exception, log entry and network request it caused, plus the value of a script
run in it and a PNG screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ("CHROMIUM", "Chromium", "PageReport")

CHROMIUM = os.environ.get("CUD_TEST_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
    "--disable-features=Translate,OptimizationHints,MediaRouter", "--hide-scrollbars", "--mute-audio",
    "--remote-debugging-pipe",
]


@dataclass
class PageReport:
    console: list[dict[str, Any]] = field(default_factory=list)  # Runtime.consoleAPICalled params
    exceptions: list[dict[str, Any]] = field(default_factory=list)  # Runtime.exceptionThrown params
    log: list[dict[str, Any]] = field(default_factory=list)  # Log.entryAdded entries
    requests: list[str] = field(default_factory=list)  # URLs of Network.requestWillBeSent
    failed: list[dict[str, Any]] = field(default_factory=list)  # Network.loadingFailed params
    value: Any = None  # what the probe script returned
    screenshot: bytes = b""  # PNG

    def problems(self) -> list[str]:
        """Console errors/warnings, exceptions and error/warning log entries, as text."""
        out = [f"console.{c['type']}: {[a.get('value', a.get('description')) for a in c.get('args', [])]}"
               for c in self.console if c.get("type") in ("error", "warning", "assert")]
        out += [f"exception: {e.get('exceptionDetails', {}).get('text')}" for e in self.exceptions]
        out += [f"log {e.get('level')} ({e.get('source')}): {e.get('text')}" for e in self.log
                if e.get("level") in ("error", "warning")]
        out += [f"load failed: {f.get('errorText')} {f.get('blockedReason', '')}" for f in self.failed]
        return out


def _high(fd: int) -> int:
    """The same pipe end on a descriptor >= 10, so dup2 onto 3 and 4 never meets it there."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Chromium:
    def __init__(self, workdir: Path, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-profile-", dir=workdir))
        self.log_path = workdir / "chromium.log"
        to_child_r, to_child_w = (_high(fd) for fd in os.pipe())
        from_child_r, from_child_w = (_high(fd) for fd in os.pipe())
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env["HOME"] = str(self.profile)  # nothing lands in the real home
        self.pid = os.posix_spawn(
            CHROMIUM,
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, str(self.log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
                (os.POSIX_SPAWN_DUP2, 1, 2),
                (os.POSIX_SPAWN_DUP2, to_child_r, 3),
                (os.POSIX_SPAWN_DUP2, from_child_w, 4),
            ],
            setpgroup=0,  # its own group: the renderer and zygote processes go with it
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._out, self._in = to_child_w, from_child_r
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.version = self.send("Browser.getVersion")

    # -- the protocol --------------------------------------------------------------------------
    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(self.timeout, f"the answer to {method}")
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise AssertionError(f"{method} failed: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _receive(self, timeout: float, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"chromium: timed out after {timeout} s waiting for {what}; log:\n{self.log()}")
            ready, _, _ = select.select([self._in], [], [], left)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise AssertionError(f"chromium closed its pipe while we waited for {what}; log:\n{self.log()}")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(line)

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict[str, Any]:
        for event in self._events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._receive(timeout or self.timeout, method)
            self._events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    def drain(self, quiet: float = 0.3) -> None:
        """Collect events until none has arrived for ``quiet`` seconds (late console/network events)."""
        while True:
            if b"\0" not in self._buffer and not select.select([self._in], [], [], quiet)[0]:
                return
            self._events.append(self._receive(self.timeout, "an event"))

    # -- one page ----------------------------------------------------------------------------
    def inspect(self, url: str, probe: str, *, width: int = 1280, height: int = 900,
                screenshot_height: int | None = None) -> PageReport:
        """Load ``url`` in a new tab; run ``probe`` (an expression, may be a promise); screenshot it."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self._events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        result = self.send("Runtime.evaluate", {"expression": probe, "awaitPromise": True, "returnByValue": True},
                           session=session)
        if "exceptionDetails" in result:
            raise AssertionError(f"the probe script failed: {result['exceptionDetails']}")
        self.send("Runtime.evaluate", {"expression": "window.scrollTo(0, 0)"}, session=session)
        clip = None
        if screenshot_height:
            clip = {"x": 0, "y": 0, "width": width, "height": screenshot_height, "scale": 1}
        shot = self.send("Page.captureScreenshot",
                         {"format": "png", **({"clip": clip, "captureBeyondViewport": True} if clip else {})},
                         session=session)
        self.drain()
        report = PageReport(value=result["result"].get("value"), screenshot=base64.b64decode(shot["data"]))
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                report.console.append(params)
            elif method == "Runtime.exceptionThrown":
                report.exceptions.append(params)
            elif method == "Log.entryAdded":
                report.log.append(params["entry"])
            elif method == "Network.requestWillBeSent":
                report.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                report.failed.append(params)
        self.send("Target.closeTarget", {"targetId": target})
        return report

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:] if self.log_path.exists() else ""

    def close(self) -> None:
        for fd in (self._out, self._in):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline, delay = time.monotonic() + 10, 0.01
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.killpg(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)
        try:  # children of the group that outlived the browser process
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        shutil.rmtree(self.profile, ignore_errors=True)
